"""Ops that run on CPU (or used to) against CPU results: unfold views, batch norm running stats,
convolutions (native now), embedding with scale_grad_by_freq, and the Python type of op errors."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def fallbacks():
    return lazyx.metrics.fallback_counters()


# B1: unfold is a native view, so repeat and tile (which write through unfold) work.
def test_repeat_matches_cpu():
    x = torch.arange(4.).view(2, 2)
    out = x.to(DEV).repeat(1, 2)
    assert out.cpu().tolist() == [[0., 1., 0., 1.], [2., 3., 2., 3.]]
    for reps in [(2, 3), (3, 1, 2), (1, 1), (2,) * 2]:
        torch.testing.assert_close(x.to(DEV).repeat(*reps).cpu(), x.repeat(*reps))
    assert "aten::unfold" not in fallbacks()


def test_tile_matches_cpu():
    x = torch.randn(2, 3)
    for reps in [(2,), (2, 2), (3, 1, 2)]:
        torch.testing.assert_close(torch.tile(x.to(DEV), reps).cpu(), torch.tile(x, reps))


def test_repeat_backward():
    x = torch.randn(2, 3, requires_grad=True)
    d = x.detach().to(DEV).requires_grad_(True)
    w = torch.randn(4, 9)
    (x.repeat(2, 3) * w).sum().backward()
    (d.repeat(2, 3) * w.to(DEV)).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad)


@pytest.mark.parametrize("dim,size,step", [(0, 2, 2), (1, 2, 1), (1, 3, 2), (-1, 1, 1), (0, 4, 1)])
def test_unfold_reads(dim, size, step):
    x = torch.randn(4, 5)
    torch.testing.assert_close(x.to(DEV).unfold(dim, size, step).cpu(), x.unfold(dim, size, step))


def test_unfold_is_a_view_and_writes_through():
    x = torch.arange(12.).view(3, 4)
    d = x.clone().to(DEV)
    u = d.unfold(1, 2, 2)
    assert u._base is d or u._is_view()
    u.mul_(-1)
    x.unfold(1, 2, 2).mul_(-1)
    torch.testing.assert_close(d.cpu(), x)
    d.unfold(0, 1, 1)[1].fill_(7.)
    x.unfold(0, 1, 1)[1].fill_(7.)
    torch.testing.assert_close(d.cpu(), x)
    # a later write to the base shows through the view
    d.add_(1)
    x.add_(1)
    torch.testing.assert_close(u.cpu(), x.unfold(1, 2, 2))


def test_unfold_overlapping_reads_and_refuses_writes():
    x = torch.arange(6.)
    d = x.to(DEV)
    u = d.unfold(0, 3, 1)  # windows share elements
    torch.testing.assert_close(u.cpu(), x.unfold(0, 3, 1))
    torch.testing.assert_close((u * 2).sum(1).cpu(), (x.unfold(0, 3, 1) * 2).sum(1))
    with pytest.raises(lazyx.LazyxError, match="share one memory location"):
        u.mul_(2)
    lazyx.mark_step()
    torch.testing.assert_close(d.cpu(), x)


def test_unfold_backward_matches_cpu():
    x = torch.randn(7, requires_grad=True)
    d = x.detach().to(DEV).requires_grad_(True)
    w = torch.randn(3, 3)
    (x.unfold(0, 3, 2) * w).sum().backward()
    (d.unfold(0, 3, 2) * w.to(DEV)).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad)
    assert not lazyx.metrics.counter_value("aten::unfold_backward")  # native (index_add)


def test_view_op_reaching_the_fallback_raises():
    # view_as_complex has no lazyx kernel: a CPU copy would silently break aliasing.
    x = torch.randn(3, 2).to(DEV)
    with pytest.raises(RuntimeError, match=r"\[aten::view_as_complex\] is a view op"):
        torch.view_as_complex(x)
    assert "aten::view_as_complex" not in fallbacks()


# B2: batch norm updates the running stats on the device exactly as on CPU.
@pytest.mark.parametrize("kind,shape", [("1d", (8, 4)), ("1d", (8, 4, 5)), ("2d", (4, 3, 5, 5))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_train_and_eval(kind, shape, momentum):
    cls = nn.BatchNorm1d if kind == "1d" else nn.BatchNorm2d
    c = shape[1]
    bn_c = cls(c, momentum=momentum)
    with torch.no_grad():
        bn_c.weight.uniform_(0.5, 1.5)
        bn_c.bias.uniform_(-0.5, 0.5)
    bn_d = cls(c, momentum=momentum)
    bn_d.load_state_dict(bn_c.state_dict())
    bn_d.to(DEV)
    lazyx.metrics.clear_counters()
    for step in range(3):
        x = torch.randn(*shape) * 2 + 1
        xc = x.clone().requires_grad_(True)
        xd = x.to(DEV).requires_grad_(True)
        g = torch.randn(*shape)
        yc, yd = bn_c(xc), bn_d(xd)
        torch.testing.assert_close(yd.cpu(), yc.detach(), atol=1e-5, rtol=1e-4)
        (yc * g).sum().backward()
        (yd * g.to(DEV)).sum().backward()
        lazyx.mark_step()
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(bn_d.weight.grad.cpu(), bn_c.weight.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(bn_d.bias.grad.cpu(), bn_c.bias.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(bn_d.running_mean.cpu(), bn_c.running_mean)
        torch.testing.assert_close(bn_d.running_var.cpu(), bn_c.running_var)
        assert bn_d.num_batches_tracked.item() == bn_c.num_batches_tracked.item() == step + 1
    assert bn_d.running_mean.device == DEV and bn_d.running_var.device == DEV
    assert not fallbacks(), fallbacks()  # batch norm and its backward run natively
    bn_c.eval()
    bn_d.eval()
    x = torch.randn(*shape)
    torch.testing.assert_close(bn_d(x.to(DEV)).cpu(), bn_c(x).detach(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(bn_d.running_mean.cpu(), bn_c.running_mean)
    torch.testing.assert_close(bn_d.running_var.cpu(), bn_c.running_var)


def test_batch_norm_running_stats_keep_identity():
    bn = nn.BatchNorm1d(3).to(DEV)
    rm = bn.running_mean
    bn(torch.randn(5, 3).to(DEV))
    assert bn.running_mean is rm
    assert rm.abs().sum().item() > 0


# B3: convolutions run natively through the overrideable ops (no CPU fallback).
def _conv_check(conv_c, x):
    conv_d = type(conv_c)(conv_c.in_channels, conv_c.out_channels, conv_c.kernel_size,
                          stride=conv_c.stride, padding=conv_c.padding, dilation=conv_c.dilation,
                          groups=conv_c.groups, bias=conv_c.bias is not None)
    conv_d.load_state_dict(conv_c.state_dict())
    conv_d.to(DEV)
    lazyx.metrics.clear_counters()
    xc = x.clone().requires_grad_(True)
    xd = x.to(DEV).requires_grad_(True)
    yc, yd = conv_c(xc), conv_d(xd)
    assert yd.shape == yc.shape
    torch.testing.assert_close(yd.cpu(), yc.detach(), atol=1e-5, rtol=1e-4)
    g = torch.randn(yc.shape)
    (yc * g).sum().backward()
    (yd * g.to(DEV)).sum().backward()
    lazyx.mark_step()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(conv_d.weight.grad.cpu(), conv_c.weight.grad, atol=1e-5, rtol=1e-4)
    if conv_c.bias is not None:
        torch.testing.assert_close(conv_d.bias.grad.cpu(), conv_c.bias.grad, atol=1e-5, rtol=1e-4)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2),
                                dict(groups=2, stride=1, padding=1), dict(bias=False)])
def test_conv1d_forward_backward(kw):
    _conv_check(nn.Conv1d(4, 6, 3, **kw), torch.randn(2, 4, 9))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(groups=2, padding=(1, 0)),
                                dict(stride=(1, 2), bias=False)])
def test_conv2d_forward_backward(kw):
    _conv_check(nn.Conv2d(4, 6, 3, **kw), torch.randn(2, 4, 7, 8))


def test_functional_conv_matches_cpu():
    x, w, b = torch.randn(1, 2, 6, 6), torch.randn(4, 2, 3, 3), torch.randn(4)
    out = F.conv2d(x.to(DEV), w.to(DEV), b.to(DEV), padding=1)
    torch.testing.assert_close(out.cpu(), F.conv2d(x, w, b, padding=1), atol=1e-5, rtol=1e-4)
    x1, w1 = torch.randn(2, 3, 10), torch.randn(5, 3, 4)
    torch.testing.assert_close(F.conv1d(x1.to(DEV), w1.to(DEV), stride=3).cpu(),
                               F.conv1d(x1, w1, stride=3), atol=1e-5, rtol=1e-4)


def test_conv_transpose_matches_cpu():
    _conv_t = nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2)
    d = nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2)
    d.load_state_dict(_conv_t.state_dict())
    d.to(DEV)
    x = torch.randn(1, 4, 5, 5)
    xc, xd = x.clone().requires_grad_(True), x.to(DEV).requires_grad_(True)
    yc, yd = _conv_t(xc), d(xd)
    torch.testing.assert_close(yd.cpu(), yc.detach(), atol=1e-5, rtol=1e-4)
    yc.sum().backward()
    yd.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(d.bias.grad.cpu(), _conv_t.bias.grad, atol=1e-5, rtol=1e-4)


# B4: embedding with scale_grad_by_freq falls back to CPU for the backward.
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_scale_grad_by_freq(padding_idx):
    emb_c = nn.Embedding(6, 3, padding_idx=padding_idx, scale_grad_by_freq=True)
    emb_d = nn.Embedding(6, 3, padding_idx=padding_idx, scale_grad_by_freq=True)
    emb_d.load_state_dict(emb_c.state_dict())
    emb_d.to(DEV)
    idx = torch.tensor([[0, 1, 1, 3], [3, 3, 5, 1]])
    g = torch.randn(2, 4, 3)
    lazyx.metrics.clear_counters()
    (emb_c(idx) * g).sum().backward()
    (emb_d(idx.to(DEV)) * g.to(DEV)).sum().backward()
    torch.testing.assert_close(emb_d.weight.grad.cpu(), emb_c.weight.grad)
    assert lazyx.metrics.counter_value("aten::embedding_dense_backward") == 1


def test_embedding_without_scale_stays_native():
    emb = nn.Embedding(6, 3).to(DEV)
    lazyx.metrics.clear_counters()
    emb(torch.tensor([0, 2, 2]).to(DEV)).sum().backward()
    lazyx.mark_step()
    assert "aten::embedding_dense_backward" not in fallbacks()


# B5: engine errors raised while an op is traced arrive as lazyx.LazyxError.
def test_op_error_is_lazyx_error():
    a, b = torch.randn(2, 3).to(DEV), torch.randn(4, 5).to(DEV)
    with pytest.raises(lazyx.LazyxError, match=r"\[mm\].*cannot be multiplied") as info:
        a.mm(b)
    assert isinstance(info.value, RuntimeError)


def test_write_through_overlapping_view_is_lazyx_error():
    u = torch.arange(6.).to(DEV).unfold(0, 3, 1)
    with pytest.raises(lazyx.LazyxError, match="share one memory location"):
        u.add_(1)


def test_op_error_in_backward_is_lazyx_error():
    class BadBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.mm(torch.ones(5, 5, device=g.device))  # [2, 3] x [5, 5]

    x = torch.randn(2, 3).to(DEV).requires_grad_(True)
    with pytest.raises(lazyx.LazyxError, match=r"\[mm\]"):
        BadBackward.apply(x).sum().backward()
