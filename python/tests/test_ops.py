"""Every op in the issue's coverage list against CPU results, forward and backward."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


def _to_dev(t, grad):
    d = t.detach().clone().to(DEV)
    if grad:
        d.requires_grad_(True)
    return d


def _flat(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def check(fn, *inputs, grad=True, atol=1e-5, rtol=1e-4, grad_idx=None, native=True):
    """Runs fn on CPU and on the device with equal inputs; compares outputs and input grads.

    native: the device ran every op (forward and backward) without a CPU fallback."""
    lazyx.metrics.clear_counters()
    want_grad = [grad and t.is_floating_point() and (grad_idx is None or i in grad_idx)
                 for i, t in enumerate(inputs)]
    cpu_in = [t.detach().clone().requires_grad_(g) for t, g in zip(inputs, want_grad)]
    dev_in = [_to_dev(t, g) for t, g in zip(inputs, want_grad)]
    out_c, out_d = _flat(fn(*cpu_in)), _flat(fn(*dev_in))
    assert len(out_c) == len(out_d)
    for c, d in zip(out_c, out_d):
        assert d.device.type == DEV.type
        assert c.dtype == d.dtype, (c.dtype, d.dtype)
        assert c.shape == d.shape, (c.shape, d.shape)
        torch.testing.assert_close(d.cpu(), c.detach(), atol=atol, rtol=rtol)
    if any(want_grad):
        gen = torch.Generator().manual_seed(1)
        loss_c = sum((c * torch.randn(c.shape, generator=gen)).sum() for c in out_c if c.requires_grad)
        gen = torch.Generator().manual_seed(1)
        loss_d = sum((d * torch.randn(d.shape, generator=gen).to(DEV)).sum()
                     for d in out_d if d.requires_grad)
        loss_c.backward()
        loss_d.backward()
        lazyx.mark_step()
        for c, d, g in zip(cpu_in, dev_in, want_grad):
            if g:
                assert d.grad is not None
                torch.testing.assert_close(d.grad.cpu(), c.grad, atol=atol, rtol=rtol)
    if native:
        fell_back = [n for n in lazyx.metrics.counter_names() if n.startswith("aten::")]
        assert not fell_back, fell_back
    return out_d


def randn(*s):
    return torch.randn(*s)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_linear_2d_and_3d():
    lin = nn.Linear(7, 5)
    w, b = lin.weight.detach(), lin.bias.detach()
    check(lambda x, w, b: F.linear(x, w, b), randn(4, 7), w, b)
    check(lambda x, w, b: F.linear(x, w, b), randn(2, 3, 7), w, b)
    check(lambda x, w: F.linear(x, w), randn(3, 7), w)


def test_module_forward_backward():
    torch.manual_seed(0)
    lin = nn.Linear(6, 4)
    lin_d = nn.Linear(6, 4)
    lin_d.load_state_dict(lin.state_dict())
    lin_d.to(DEV)
    x = randn(3, 6)
    yc, yd = lin(x), lin_d(x.to(DEV))
    torch.testing.assert_close(yd.cpu(), yc.detach())
    yc.sum().backward()
    yd.sum().backward()
    torch.testing.assert_close(lin_d.weight.grad.cpu(), lin.weight.grad)
    torch.testing.assert_close(lin_d.bias.grad.cpu(), lin.bias.grad)


def test_relu_gelu():
    x = randn(4, 9)
    check(F.relu, x)
    check(lambda t: nn.ReLU()(t), x)
    check(F.gelu, x)
    check(lambda t: F.gelu(t, approximate="tanh"), x)
    check(lambda t: torch.relu_(t * 1.0), x)


def test_layer_norm():
    x = randn(3, 4, 8)
    w, b = randn(8), randn(8)
    check(lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5), x, w, b, atol=1e-4)
    check(lambda x: F.layer_norm(x, (4, 8)), x, atol=1e-4)
    ln = nn.LayerNorm(8)
    check(lambda x, w, b: F.layer_norm(x, (8,), w, b), randn(5, 8), ln.weight.detach(), ln.bias.detach(),
          atol=1e-4)


def test_dropout_train_and_eval():
    x = (randn(64, 32).abs() + 0.5).to(DEV).requires_grad_()
    drop = nn.Dropout(0.25)
    drop.train()
    y = drop(x)
    y.sum().backward()
    yc, xc, gc = y.detach().cpu(), x.detach().cpu(), x.grad.cpu()
    kept = yc != 0
    frac = kept.float().mean().item()
    assert 0.6 < frac < 0.9
    torch.testing.assert_close(yc[kept], xc[kept] / 0.75)
    torch.testing.assert_close(gc, kept.float() / 0.75)
    drop.eval()
    torch.testing.assert_close(drop(x).detach().cpu(), xc)
    check(lambda t: F.dropout(t, 0.5, training=False), randn(3, 3))


def test_embedding():
    w = randn(10, 4)
    idx = torch.tensor([[1, 2, 4], [4, 3, 9]])
    check(lambda w, i: F.embedding(i, w), w, idx)
    check(lambda w, i: F.embedding(i, w, padding_idx=4), w, idx)
    emb = nn.Embedding(10, 4).to(DEV)
    out = emb(idx.to(DEV))
    assert out.shape == (2, 3, 4)


def test_log_softmax_softmax():
    x = randn(4, 10)
    check(lambda t: F.log_softmax(t, dim=1), x)
    check(lambda t: F.log_softmax(t, dim=0), x)
    check(lambda t: F.softmax(t, dim=-1), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_and_cross_entropy(reduction):
    x = randn(6, 5)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction=reduction), x, t)
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), x, t)
    check(lambda x, t: nn.CrossEntropyLoss(reduction=reduction)(x, t), x, t)
    check(lambda x, t: nn.NLLLoss(reduction=reduction)(x, t), x, t)
    w = randn(5).abs()
    check(lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction=reduction), x, t, w, grad_idx={0})
    t2 = torch.tensor([0, -100, 2, 2, -100, 3])
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), x, t2)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), randn(4, 3), randn(4, 3))
    check(lambda a, b: nn.MSELoss(reduction=reduction)(a, b), randn(7), randn(7), grad_idx={0})


def test_elementwise_and_reductions():
    a, b = randn(3, 4), randn(3, 4)
    check(lambda a, b: a + b * 2 - a / (b.abs() + 1), a, b)
    check(lambda a, b: torch.maximum(a, b) + torch.minimum(a, b), a, b)
    check(lambda a: (a.exp() + a.abs().sqrt() + a.tanh() + a.sigmoid() + a.sin() + a.cos()).sum(1), a)
    check(lambda a: a.pow(2) + 1 - a, a)
    check(lambda a: 1 - a * 3 + 2 / (a.abs() + 1), a)
    check(lambda a: a.clamp(-0.5, 0.5), a)
    check(lambda a: a.sum() + a.mean() + a.sum(0).mean(), a)
    check(lambda a: a.mean(dim=1, keepdim=True), a)
    check(lambda a: a.amax(1) + a.amin(0).sum(), a, grad=False)
    check(lambda a: a.argmax(1), a, grad=False)
    check(lambda a: a.max(1)[1], a, grad=False)
    check(lambda a, b: torch.where(a > b, a, b), a, b)
    check(lambda a: (a > 0).sum(), a, grad=False)
    check(lambda a, b: torch.addcmul(a, a, b, value=0.5) + torch.addcdiv(a, a, b.abs() + 1, value=-2), a, b)
    check(lambda a: a.logsumexp(1), a)
    check(lambda a: torch.cat([a, a * 2], 1), a)
    check(lambda a: torch.stack([a, a + 1], 0), a)


def test_matmul_family():
    check(torch.mm, randn(3, 4), randn(4, 5))
    check(torch.matmul, randn(2, 3, 4), randn(4, 5))
    check(torch.bmm, randn(2, 3, 4), randn(2, 4, 5))
    check(lambda a, b, c: torch.addmm(a, b, c, beta=0.5, alpha=2), randn(3, 5), randn(3, 4), randn(4, 5))
    check(lambda a, b: a @ b.t(), randn(3, 4), randn(5, 4))


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (3, 1), (3, 5), (), (1,)], ids=str)
def test_addmm_unit_scales(bias_shape):
    # beta = alpha = 1 (nn.Linear) lowers to mm + add; every bias broadcast must match CPU.
    check(torch.addmm, torch.randn(bias_shape), randn(3, 4), randn(4, 5))
    check(lambda a, b, c: torch.addmm(a, b, c, beta=1, alpha=1.0), torch.randn(bias_shape),
          randn(3, 4), randn(4, 5))


def test_addmm_unit_scales_bad_bias_and_float64():
    a, b = randn(3, 4).to(DEV), randn(4, 5).to(DEV)
    with pytest.raises(RuntimeError, match="broadcast"):
        torch.addmm(randn(2, 5).to(DEV), a, b).cpu()
    check(torch.addmm, torch.randn(5, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64),
          torch.randn(4, 5, dtype=torch.float64), atol=1e-12, rtol=1e-12)


def test_views_forward_backward():
    x = randn(4, 6)
    check(lambda t: t.view(2, 12).t().reshape(3, 8) * 2, x)
    check(lambda t: t.transpose(0, 1)[1:4].unsqueeze(0).squeeze(0).permute(1, 0), x)
    check(lambda t: t[:, 1:5:2].sum(1) + t[2, :4] + t[-1, 3], x)
    check(lambda t: t.unsqueeze(1).expand(4, 3, 6).sum(1), x)
    check(lambda t: t.flatten() * 1, x)
    check(lambda t: torch.chunk(t, 2, 1)[1] * 3, x)
    check(lambda t: torch.split(t, [1, 3], 0)[1].contiguous(), x)
    check(lambda t: t.unbind(0)[2], x)


def test_inplace_writes_through_views():
    base = torch.arange(20.).reshape(4, 5)
    d = base.clone().to(DEV)
    c = base.clone()
    d[0] += 1
    c[0] += 1
    d[:, 1:3] = torch.full((4, 2), 7.)
    c[:, 1:3] = torch.full((4, 2), 7.)
    v = torch.arange(4.).to(DEV)
    d[:, 4] = v
    c[:, 4] = torch.arange(4.)
    d.t()[3].mul_(10)
    c.t()[3].mul_(10)
    torch.testing.assert_close(d.cpu(), c)
    lazyx.mark_step()
    torch.testing.assert_close(d.cpu(), c)
    # reading a view shows later updates of the base
    view = d[1]
    d.add_(1)
    c.add_(1)
    torch.testing.assert_close(view.cpu(), c[1])


def test_inplace_on_view_with_autograd():
    x = randn(3, 4)

    def f(t):
        y = t * 1
        y[:, 1:3] *= 2
        y[0] += t[1]
        return y
    check(f, x)


def test_index_ops():
    x = randn(5, 3)
    idx = torch.tensor([4, 0, 2])
    check(lambda t: t.index_select(0, idx.to(t.device)), x)
    check(lambda t: t[idx.to(t.device)], x)
    src = randn(3, 3)
    c = x.clone().index_copy_(0, idx, src)
    d = x.clone().to(DEV)
    d_id = lazyx.tensor_id(d)
    d.index_copy_(0, idx.to(DEV), src.to(DEV))
    assert lazyx.tensor_id(d) == d_id
    torch.testing.assert_close(d.cpu(), c)
    check(lambda t, s: t.index_copy(0, idx.to(t.device), s), x, src)
    dup = torch.tensor([2, 0, 2])
    check(lambda t, s: t.index_add(0, dup.to(t.device), s, alpha=0.5), x, src)
    check(lambda t, s: t.index_add(1, torch.tensor([1, 1]).to(t.device), s), x, randn(5, 2))
    check(lambda t: t.clone().index_fill_(1, torch.tensor([0, 2]).to(t.device), -3.0), x)
    check(lambda t: (t > 0).logical_and_(t < 1).float() + t.clamp(0, 1), x)
    check(lambda t: t.gather(1, torch.tensor([[0], [2], [1], [1], [0]]).to(t.device)), x)
    d2 = x.clone().to(DEV)
    c2 = x.clone()
    d2[idx.to(DEV)] = 0.5
    c2[idx] = 0.5
    torch.testing.assert_close(d2.cpu(), c2)
    d2.masked_fill_(d2 > 0, -1.0)
    c2.masked_fill_(c2 > 0, -1.0)
    torch.testing.assert_close(d2.cpu(), c2)


def test_random_on_device():
    torch.manual_seed(3)
    a = torch.randn(1000, device=DEV)
    b = torch.rand(1000, device=DEV)
    r = torch.randint(0, 10, (1000,), device=DEV)
    assert a.device.type == DEV.type and r.dtype == torch.int64
    ac, bc, rc = a.cpu(), b.cpu(), r.cpu()
    assert abs(ac.mean().item()) < 0.15 and 0.8 < ac.std().item() < 1.2
    assert 0 <= bc.min().item() and bc.max().item() < 1 and abs(bc.mean().item() - 0.5) < 0.05
    assert rc.min().item() == 0 and rc.max().item() == 9
    torch.manual_seed(3)
    a2 = torch.randn(1000, device=DEV)
    torch.testing.assert_close(a2.cpu(), ac)  # torch.manual_seed makes it reproducible
    u = torch.empty(10, device=DEV).uniform_(2, 3)
    assert 2 <= u.cpu().min().item() and u.cpu().max().item() <= 3
    n = torch.empty(10, 10, device=DEV).normal_(5, 0.1)
    assert abs(n.cpu().mean().item() - 5) < 0.1


def test_to_cpu_item_print():
    x = torch.tensor([[1.5, -2.0], [3.0, 4.25]])
    d = x.to(DEV)
    assert d.device == DEV
    assert d.dtype == torch.float32
    torch.testing.assert_close(d.cpu(), x)
    torch.testing.assert_close(d.to("cpu"), x)
    assert d[1, 1].item() == 4.25
    assert d.sum().item() == pytest.approx(6.75)
    assert (d > 0).sum().item() == 3
    assert d.to(torch.float64).dtype == torch.float64
    assert d.double().cpu().dtype == torch.float64
    assert d.long().cpu().tolist() == [[1, -2], [3, 4]]
    assert d.to(torch.int32).cpu().dtype == torch.int32
    s = str(d)
    assert "lazy" in s and "4.2500" in s
    assert torch.tensor(7, device=DEV).item() == 7
    assert torch.zeros(2, 3, device=DEV).cpu().sum().item() == 0
    assert torch.ones(2, device=DEV).cpu().tolist() == [1.0, 1.0]
    assert torch.full((2,), 3.0, device=DEV).cpu().tolist() == [3.0, 3.0]
    t = torch.randn(3, 4).t()  # a non-contiguous CPU tensor
    torch.testing.assert_close(t.to(DEV).cpu(), t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.bool], ids=str)
def test_host_transfers_are_bit_exact(dtype):
    x = torch.randn(5, 7) * 100
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    d = x.to(DEV)
    assert d.dtype == dtype
    back = d.cpu()
    assert back.dtype == dtype and torch.equal(back, x)
    torch.testing.assert_close((d[1:, ::2] * 1).cpu(), x[1:, ::2] * 1)  # a view, computed
    e = torch.empty(0, 3, dtype=dtype).to(DEV)
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)


def test_narrow_ints_keep_their_dtype_on_the_device():
    for dtype in (torch.uint8, torch.int8, torch.int16):
        x = torch.arange(-3, 4).to(dtype)
        d = x.to(DEV)
        assert d.dtype == dtype
        assert d.cpu().tolist() == x.tolist()


def test_fallback_is_counted():
    x = torch.randn(3, 3).to(DEV)
    lazyx.metrics.clear_counters()
    y = torch.geqrf(x)[0]  # no native kernel: runs on CPU
    torch.testing.assert_close(y.cpu(), torch.geqrf(x.cpu())[0])
    assert lazyx.metrics.counter_value("aten::geqrf") >= 1
    assert "aten::geqrf" in lazyx.metrics.counter_names()


def _train(model, opt_fn, steps, dev, x, y):
    model = model.to(dev)
    opt = opt_fn(model.parameters())
    xs, ys = x.to(dev), y.to(dev)
    for i in range(steps):
        opt.zero_grad(set_to_none=(i % 2 == 0))
        loss = F.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        if dev != "cpu":
            lazyx.mark_step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("name,opt_fn", [
    ("sgd", lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd_momentum_wd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-2)),
    ("sgd_nesterov", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True)),
    ("adam", lambda p: torch.optim.Adam(p, lr=1e-2)),
    ("adam_wd_amsgrad", lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1)),
    # foreach=True runs the _foreach_* ops, natively as loops over the per-tensor kernels
    ("sgd_foreach", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-2, foreach=True)),
    ("adam_foreach", lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True)),
    ("adamw_foreach_amsgrad", lambda p: torch.optim.AdamW(p, lr=1e-2, amsgrad=True, foreach=True)),
])
def test_optimizers_match_cpu(name, opt_fn):
    torch.manual_seed(0)
    make = lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    m1 = make()
    m2 = make()
    m2.load_state_dict(m1.state_dict())
    x, y = torch.randn(12, 8), torch.randint(0, 4, (12,))
    pc = _train(m1, opt_fn, 5, "cpu", x, y)
    pd = _train(m2, opt_fn, 5, DEV, x, y)
    for a, b in zip(pc, pd):
        torch.testing.assert_close(b, a, atol=2e-5, rtol=1e-4)
    assert not any(n.startswith("aten::") for n in lazyx.metrics.counter_names()), \
        lazyx.metrics.fallback_counters()


def test_zero_grad_modes():
    lin = nn.Linear(3, 2).to(DEV)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    lin(torch.ones(1, 3).to(DEV)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert lin.weight.grad is not None and lin.weight.grad.cpu().abs().sum().item() == 0
    opt.zero_grad(set_to_none=True)
    assert lin.weight.grad is None


def test_transformer_block_forward_backward():
    torch.manual_seed(0)
    d_model, heads = 16, 2

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, d_model)
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.ff = nn.Sequential(nn.Linear(d_model, 32), nn.GELU(), nn.Linear(32, d_model))
            self.head = nn.Linear(d_model, 20)

        def forward(self, idx):
            x = self.emb(idx)
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // heads) ** 0.5)
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            x = x + self.ff(self.ln2(x))
            return self.head(x)

    mc = Block()
    md = Block()
    md.load_state_dict(mc.state_dict())
    md.to(DEV)
    idx = torch.randint(0, 20, (2, 5))
    tgt = torch.randint(0, 20, (2, 5))
    lc = F.cross_entropy(mc(idx).view(-1, 20), tgt.view(-1))
    ld = F.cross_entropy(md(idx.to(DEV)).view(-1, 20), tgt.to(DEV).view(-1))
    lc.backward()
    ld.backward()
    lazyx.mark_step()
    assert ld.item() == pytest.approx(lc.item(), rel=1e-4)
    for (n, pc), pd in zip(mc.named_parameters(), md.parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-3, msg=n)


def test_user_paths():
    """Common user code: masks, state dicts, printing large tensors, grad clipping."""
    x = torch.randn(50, 40)
    d = x.to(DEV)
    torch.testing.assert_close(d[d > 1].cpu(), x[x > 1])
    d[d > 1] = 0.0
    x[x > 1] = 0.0
    torch.testing.assert_close(d.cpu(), x)
    s = str(d)
    assert "..." in s and "lazy" in s
    m = nn.Linear(4, 3).to(DEV)
    m2 = nn.Linear(4, 3)
    m2.load_state_dict({k: v.cpu() for k, v in m.state_dict().items()})
    m3 = nn.Linear(4, 3).to(DEV)
    m3.load_state_dict(m2.state_dict())
    torch.testing.assert_close(m3.weight.cpu(), m.weight.cpu())
    m(torch.randn(2, 4).to(DEV)).pow(2).sum().backward()
    g = m.weight.grad.cpu().clone()
    total = nn.utils.clip_grad_norm_(m.parameters(), 0.1)
    assert total.item() > 0
    assert m.weight.grad.cpu().norm().item() <= 0.1 + 1e-5 or total.item() <= 0.1
    assert m.cpu().weight.device.type == "cpu"
    assert torch.arange(5, device=DEV).cpu().tolist() == [0, 1, 2, 3, 4]
    assert g.shape == (3, 4)


@pytest.mark.parametrize("size,stride,offset", [
    ((2, 2), (4, 1), 1), ((2, 3), (1, 4), 2), ((3,), (0,), 5), ((), (), 7), ((3,), (5,), 0),
    ((4, 3), (1, 4), 0), ((2, 1, 2), (6, 1, 2), 1), ((3, 4), (4, 1), 0),
])
def test_as_strided_reads_and_writes_through(size, stride, offset):
    x = torch.arange(12.).view(3, 4)
    d = x.clone().to(DEV)
    torch.testing.assert_close(d.as_strided(size, stride, offset).cpu(), x.as_strided(size, stride, offset))
    if 0 not in stride:
        d.as_strided(size, stride, offset).mul_(-1)
        x.as_strided(size, stride, offset).mul_(-1)
        torch.testing.assert_close(d.cpu(), x)


def test_diagonal_view():
    x = torch.arange(12.).view(3, 4)
    d = x.clone().to(DEV)
    d.diagonal().add_(100)
    x.diagonal().add_(100)
    torch.testing.assert_close(d.cpu(), x)
    check(lambda t: t.diagonal() * 2, torch.randn(4, 4))


def test_norms_arange_all_any_reciprocal():
    x = randn(4, 5)
    check(lambda t: t.norm(), x)
    check(lambda t: torch.norm(t, 1, dim=1), x, grad=False)
    check(lambda t: torch.linalg.vector_norm(t, float("inf")), x, grad=False)
    check(lambda t: torch.linalg.vector_norm(t, 3, dim=0, keepdim=True), x, grad=False)
    check(lambda t: t.abs().add(1).reciprocal(), x)
    assert torch.arange(5, device=DEV).cpu().tolist() == [0, 1, 2, 3, 4]
    assert torch.arange(1, 10, 3, device=DEV).cpu().tolist() == [1, 4, 7]
    torch.testing.assert_close(torch.arange(0, 1, 0.25, device=DEV).cpu(), torch.arange(0, 1, 0.25))
    d = x.to(DEV)
    assert (d > -10).all().item() is True and (d > 10).any().item() is False
    lin = nn.Linear(5, 3).to(DEV)
    lin(d).pow(2).sum().backward()
    lazyx.metrics.clear_counters()
    total = nn.utils.clip_grad_norm_(lin.parameters(), 0.5)
    lazyx.mark_step()
    assert total.item() > 0.5
    gn = torch.cat([p.grad.cpu().flatten() for p in lin.parameters()]).norm().item()
    assert gn == pytest.approx(0.5, rel=1e-4)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


def test_statistics_and_predicates():
    x = randn(4, 6)
    check(lambda t: t.var() + t.std(), x)
    check(lambda t: t.var(1, keepdim=True), x)
    check(lambda t: t.std(0, unbiased=False), x)
    check(lambda t: torch.var(t, dim=(0, 1), correction=0), x)
    check(lambda t: t.sign(), x, grad=False)
    y = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.0])
    check(lambda t: torch.isnan(t), y, grad=False)
    check(lambda t: torch.isfinite(t), y, grad=False)
    check(lambda t: torch.isfinite(t), torch.tensor([1, 2]), grad=False)
    lazyx.metrics.clear_counters()
    check(lambda t: (t * 2).std(), x)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


def test_nn_transformer_encoder_layer():
    torch.manual_seed(0)
    lc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    ld = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    ld.load_state_dict(lc.state_dict())
    ld.to(DEV)
    x = torch.randn(2, 5, 16)
    yc, yd = lc(x), ld(x.to(DEV))
    torch.testing.assert_close(yd.cpu(), yc.detach(), atol=1e-5, rtol=1e-4)
    yc.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    lazyx.mark_step()
    for (n, a), b in zip(lc.named_parameters(), ld.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, atol=1e-4, rtol=1e-3, msg=n)
    lc.eval()
    ld.eval()
    with torch.no_grad():
        torch.testing.assert_close(ld(x.to(DEV)).cpu(), lc(x), atol=1e-5, rtol=1e-4)
    # with dropout, in training mode
    drop = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True).to(DEV)
    drop(x.to(DEV)).sum().backward()
    lazyx.mark_step()
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


def test_foreach_ops_match_cpu():
    base = [randn(3, 4), randn(5), randn(2, 2)]
    others = [randn(3, 4), randn(5), randn(2, 2)]
    dens = [t.abs() + 0.5 for t in (randn(3, 4), randn(5), randn(2, 2))]

    def run(dev):
        ts = [t.clone().to(dev) for t in base]
        os_ = [t.to(dev) for t in others]
        ds = [t.to(dev) for t in dens]
        torch._foreach_add_(ts, [1.0, -2.0, 0.5])          # ScalarList
        torch._foreach_mul_(ts, 3.0)                        # Scalar
        torch._foreach_add_(ts, os_, alpha=0.25)            # List with alpha
        torch._foreach_addcdiv_(ts, os_, ds, [0.5, 2.0, -1.0])
        torch._foreach_maximum_(ts, os_)                    # no per-tensor in-place op
        outs = torch._foreach_sqrt(torch._foreach_abs(ts))  # out-of-place results
        norms = torch._foreach_norm(ts)
        return [t.cpu() for t in ts + list(outs) + list(norms)]

    for got, want in zip(run(DEV), run("cpu")):
        torch.testing.assert_close(got, want)


def test_foreach_list_length_mismatch_raises():
    ts = [randn(2).to(DEV), randn(2).to(DEV)]
    with pytest.raises(RuntimeError):
        torch._foreach_add_(ts, [1.0])
    with pytest.raises(RuntimeError):
        torch._foreach_add_(ts, [randn(2).to(DEV)])
