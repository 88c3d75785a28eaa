"""Pooling, batch/group/instance norm, upsampling, padding, unfold/fold and max_unpool on the
device against CPU eager: values and gradients, with no CPU fallback."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def check(f, *inputs, atol=1e-5, rtol=1e-4, grad=True, no_grad=()):
    """f on CPU and on the device: equal outputs and input gradients, and no fallback.
    Floating inputs get gradients unless their position is in no_grad."""
    lazyx.metrics.clear_counters()
    rg = [grad and x.is_floating_point() and i not in no_grad for i, x in enumerate(inputs)]
    xc = [x.clone().requires_grad_(r) for x, r in zip(inputs, rg)]
    xd = [x.to(DEV).requires_grad_(r) for x, r in zip(inputs, rg)]
    yc, yd = f(*xc), f(*xd)
    yc = yc if isinstance(yc, tuple) else (yc,)
    yd = yd if isinstance(yd, tuple) else (yd,)
    for a, b in zip(yc, yd):
        assert b.device == DEV and b.shape == a.shape and b.dtype == a.dtype
        torch.testing.assert_close(b.cpu(), a.detach(), atol=atol, rtol=rtol)
    if grad and yc[0].requires_grad:
        g = torch.randn(yc[0].shape, dtype=yc[0].dtype)
        (yc[0] * g).sum().backward()
        (yd[0] * g.to(DEV)).sum().backward()
        lazyx.mark_step()
        for a, b in zip(xc, xd):
            if a.requires_grad:
                torch.testing.assert_close(b.grad.cpu(), a.grad, atol=atol, rtol=rtol)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
                                dict(kernel_size=3, stride=1, padding=1, dilation=2)])
def test_max_pool2d(kw):
    check(lambda t: F.max_pool2d(t, return_indices=True, **kw), torch.randn(2, 3, 9, 8))


def test_max_pool2d_strided_input_and_unbatched():
    check(lambda t: F.max_pool2d(t.transpose(2, 3), 2), torch.randn(2, 3, 6, 7))
    check(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), torch.randn(3, 7, 7))


def test_max_pool_ties_pick_the_first_index_as_eager():
    x = torch.tensor([[[[1., 1., 2., 2.], [1., 1., 2., 2.]]]])
    check(lambda t: F.max_pool2d(t, 2, return_indices=True), x)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=2, stride=1, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                     dilation=2)])
def test_max_pool1d_3d(kw):
    check(lambda t: F.max_pool1d(t, return_indices=True, **kw), torch.randn(2, 3, 11))
    check(lambda t: F.max_pool3d(t, return_indices=True, **kw), torch.randn(2, 2, 6, 5, 7))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, padding=1, count_include_pad=False),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                     count_include_pad=False),
                                dict(kernel_size=(3, 2), padding=1, divisor_override=4)])
def test_avg_pool2d(kw):
    check(lambda t: F.avg_pool2d(t, **kw), torch.randn(2, 3, 9, 8))


def test_avg_pool1d_3d_and_integer():
    check(lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True), torch.randn(2, 3, 10))
    check(lambda t: F.avg_pool3d(t, 3, 2, 1, count_include_pad=False), torch.randn(2, 2, 5, 6, 7))
    check(lambda t: F.avg_pool3d(t, 2, divisor_override=3), torch.randn(1, 2, 4, 4, 4))
    x = torch.randint(-20, 20, (2, 3, 7, 7))  # integer averages truncate toward zero
    check(lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False), x, grad=False)


@pytest.mark.parametrize("out", [(1, 1), (3, 3), (4, 5), (7, 2)])
def test_adaptive_pool2d(out):
    x = torch.randn(2, 3, 7, 9)
    check(lambda t: F.adaptive_avg_pool2d(t, out), x)
    check(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x)


def test_adaptive_pool1d_3d():
    check(lambda t: F.adaptive_avg_pool1d(t, 4), torch.randn(2, 3, 10))
    check(lambda t: F.adaptive_max_pool1d(t, 3, return_indices=True), torch.randn(2, 3, 10))
    check(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), torch.randn(1, 2, 5, 6, 7))
    check(lambda t: F.adaptive_max_pool3d(t, (2, 3, 4)), torch.randn(1, 2, 5, 6, 7))


def test_max_unpool():
    x = torch.randn(2, 3, 8, 8)
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    v = torch.randn(2, 3, 4, 4)
    check(lambda t, i: F.max_unpool2d(t, i, 2), v, idx)
    x3 = torch.randn(1, 2, 4, 4, 4)
    _, idx3 = F.max_pool3d(x3, 2, return_indices=True)
    check(lambda t, i: F.max_unpool3d(t, i, 2), torch.randn(1, 2, 2, 2, 2), idx3)


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", False), ("bilinear", True),
                                        ("bicubic", False), ("bicubic", True)])
@pytest.mark.parametrize("size", [dict(size=(11, 5)), dict(scale_factor=2),
                                  dict(scale_factor=1.7), dict(scale_factor=0.6)])
def test_interpolate_2d(mode, align, size):
    check(lambda t: F.interpolate(t, mode=mode, align_corners=align, **size),
          torch.randn(2, 3, 6, 7))


@pytest.mark.parametrize("mode", ["nearest", "linear", "nearest-exact"])
def test_interpolate_1d_3d(mode):
    kw = dict(align_corners=False) if mode == "linear" else {}
    check(lambda t: F.interpolate(t, scale_factor=2.5, mode=mode, **kw), torch.randn(2, 3, 5))
    mode3 = "trilinear" if mode == "linear" else mode
    check(lambda t: F.interpolate(t, size=(3, 5, 8), mode=mode3, **kw), torch.randn(1, 2, 4, 3, 5))
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode=mode3, **kw),
          torch.randn(1, 2, 4, 3, 5))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pads,shape", [((2, 1), (2, 3, 6)), ((1, 2, 3, 0), (2, 3, 5, 6)),
                                        ((-1, 2), (2, 3, 6)), ((1, 1, 2, 0, 0, 2), (1, 2, 3, 4, 5))])
def test_pad(mode, pads, shape):
    check(lambda t: F.pad(t, pads, mode=mode), torch.randn(*shape))


def test_pad_integer_and_bad_reflect_padding():
    # Eager CPU has no integer reflection kernel; the device copies exactly as for floats.
    x = torch.arange(12).view(2, 6)
    want = F.pad(x.double(), (2, 2), mode="reflect").long()
    assert torch.equal(F.pad(x.to(DEV), (2, 2), mode="reflect").cpu(), want)
    with pytest.raises(Exception, match="padding"):
        F.pad(torch.randn(1, 2, 3).to(DEV), (3, 0), mode="reflect")


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1),
                                dict(kernel_size=2, dilation=2, padding=1, stride=(1, 2))])
def test_unfold_fold(kw):
    x = torch.randn(2, 3, 7, 8)
    check(lambda t: F.unfold(t, **kw), x)
    cols = F.unfold(x, **kw)
    check(lambda t: F.fold(t, (7, 8), **kw), torch.randn(cols.shape))


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 4), 3), ((3, 4, 7), 2), ((2, 4), 2)])
def test_group_norm_and_instance_norm(shape, groups):
    c = shape[1]
    w, b = torch.rand(c) + 0.5, torch.randn(c)
    check(lambda t, w_, b_: F.group_norm(t, groups, w_, b_, eps=1e-3), torch.randn(*shape), w, b)
    check(lambda t: F.group_norm(t, groups), torch.randn(*shape))
    if len(shape) > 2:
        check(lambda t, w_, b_: F.instance_norm(t, weight=w_, bias=b_), torch.randn(*shape), w, b)


def test_batch_norm_functional_train_eval_and_no_affine():
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    w, b = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    check(lambda t, w_, b_: F.batch_norm(t, None, None, w_, b_, training=True), x, w, b)
    check(lambda t, m, v, w_, b_: F.batch_norm(t, m, v, w_, b_, training=False, eps=1e-3),
          x, rm, rv, w, b, no_grad=(1, 2))
    check(lambda t: F.batch_norm(t, None, None, training=True), x)
    check(lambda t: F.batch_norm(t, None, None, training=True), torch.randn(6, 4))


def test_instance_norm_running_stats_match_eager():
    inc = nn.InstanceNorm2d(3, track_running_stats=True, affine=True)
    ind = nn.InstanceNorm2d(3, track_running_stats=True, affine=True).to(DEV)
    for _ in range(2):
        x = torch.randn(2, 3, 4, 4)
        torch.testing.assert_close(ind(x.to(DEV)).cpu(), inc(x).detach(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ind.running_mean.cpu(), inc.running_mean)
    torch.testing.assert_close(ind.running_var.cpu(), inc.running_var)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_w = nn.Parameter(torch.randn(4, 3, 1, 1) * 0.5)  # 1x1 conv as a matmul
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(4 * 2 * 2, 5)

    def forward(self, x):
        x = torch.einsum("nchw,oc->nohw", x, self.conv_w.flatten(1))
        x = F.relu(self.bn(x))
        x = F.max_pool2d(x, 2)
        x = self.gn(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False))
        x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), 3, 2, 1)
        x = F.adaptive_avg_pool2d(x, (2, 2))
        return self.fc(x.flatten(1))


def test_training_steps_match_eager_natively_and_compile_once():
    torch.manual_seed(1)
    net_c = Net()
    net_d = Net()
    net_d.load_state_dict(net_c.state_dict())
    net_d.to(DEV)
    opt_c = torch.optim.SGD(net_c.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(net_d.parameters(), lr=0.1, momentum=0.9)
    compiles = []
    for step in range(4):
        x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
        for net, opt, dev in ((net_c, opt_c, "cpu"), (net_d, opt_d, DEV)):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(x.to(dev)), y.to(dev)).backward()
            opt.step()
        lazyx.mark_step()
        data = lazyx.metrics.metric_data("CompileTime")
        compiles.append(data[0] if data else 0)
        for (n, pc), pd in zip(net_c.state_dict().items(), net_d.state_dict().values()):
            torch.testing.assert_close(pd.cpu(), pc, atol=1e-4, rtol=1e-4, msg=n)
    assert compiles[3] == compiles[1], compiles  # steps 3 and 4 reuse the compiled step
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()
    net_c.eval()
    net_d.eval()
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(net_d(x.to(DEV)).cpu(), net_c(x).detach(), atol=1e-4, rtol=1e-4)


def test_bad_inputs_raise_clear_errors():
    x = torch.randn(1, 2, 4, 4).to(DEV)
    with pytest.raises(Exception, match="pad"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(Exception, match="groups"):
        F.group_norm(torch.randn(2, 6, 3).to(DEV), 4)
    with pytest.raises(Exception):
        F.avg_pool2d(x, 5)


def test_batch_norm_running_stats_are_donated_in_place():
    bn = nn.BatchNorm2d(3).to(DEV)
    rm, rv = bn.running_mean, bn.running_var
    x = torch.randn(4, 3, 5, 5).to(DEV)
    lazyx.mark_step()
    for _ in range(2):
        with torch.no_grad():
            bn(x)
        lazyx.mark_step()
        rep = lazyx.last_step()
        donated = {p.output_tensor_id for p in rep.params if p.donated}
        assert {lazyx.tensor_id(rm), lazyx.tensor_id(rv)} <= donated, rep
    assert bn.running_mean is rm and bn.running_var is rv
    assert not lazyx.metrics.fallback_counters()
