"""Sorts, scans, reductions, advanced indexing, scatters, losses and distances on the device
against CPU eager: values and gradients in several dtypes, with no CPU fallback; value-dependent
shapes (masks, unique) read their input once (ShapeSync:<op>) and keep donation working; a
GPT-style generation loop runs without fallback."""
import pytest
import torch
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()
FLOATS = [torch.float32, torch.float64, torch.bfloat16]
ALL = FLOATS + [torch.int64, torch.bool]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def fallbacks():
    return dict(lazyx.metrics.fallback_counters())


def make(shape, dtype, lo=-4, hi=5):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape) * 2).to(dtype)
    return torch.randint(lo, hi, shape, dtype=dtype)


def tol(dtype):
    return dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-4)


def same(a, b, dtype=torch.float32):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, dtype)
        return
    if not isinstance(a, torch.Tensor):
        assert a == b
        return
    b = b.cpu()
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    torch.testing.assert_close(b, a, equal_nan=True, **tol(dtype))


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in flat(o)]


def check(fn, *inputs, grad=True, dtype=torch.float32, allow=()):
    """fn on CPU and on the device: same values; for float inputs also the same gradients of a
    random weighting of the float outputs; and no op falls back to CPU (but those in allow)."""
    before = fallbacks()
    need = grad and dtype in (torch.float32, torch.float64)
    cpu_in = [t.clone().requires_grad_(need and t.is_floating_point()) for t in inputs]
    dev_in = [t.detach().to(DEV).requires_grad_(need and t.is_floating_point()) for t in inputs]
    want, got = fn(*cpu_in), fn(*dev_in)
    same(want, got, dtype)
    if need:
        outs_w = [o for o in flat(want) if o.is_floating_point() and o.requires_grad]
        outs_g = [o for o in flat(got) if o.is_floating_point() and o.requires_grad]
        ws = [torch.randn(o.shape, dtype=o.dtype) for o in outs_w]
        if outs_w:
            sum((o * w).sum() for o, w in zip(outs_w, ws)).backward()
            sum((o * w.to(DEV)).sum() for o, w in zip(outs_g, ws)).backward()
        for c, d in zip(cpu_in, dev_in):
            if c.requires_grad and c.grad is not None:
                torch.testing.assert_close(d.grad.cpu(), c.grad, **tol(dtype))
    new = {k for k, v in fallbacks().items() if before.get(k) != v} - set(allow)
    assert not new, f"fell back: {new}"


# Triangles, flips, rolls, diagonals.
@pytest.mark.parametrize("dtype", ALL)
def test_tril_triu_flip_roll(dtype):
    x = make((3, 4, 5), dtype)
    for k in (-1, 0, 2):
        check(lambda t: (t.tril(k), t.triu(k)), x, dtype=dtype)
    check(lambda t: (t.flip(0, 2), t.flip(-1), torch.fliplr(t[0])), x, dtype=dtype)
    check(lambda t: (t.roll(2, 1), t.roll((1, -3), (0, 2)), t.roll(7)), x, dtype=dtype)
    check(lambda t: (t.diag(), t.diag(1), t.diag(-2)), make((4, 5), dtype), dtype=dtype)
    check(lambda t: (t.diag(), t.diag(2), t.diag(-1)), make((3,), dtype), dtype=dtype)
    if dtype not in (torch.bool, torch.bfloat16):  # eager has no trace for these
        check(lambda t: t.trace(), make((4, 5), dtype), dtype=dtype)


def test_inplace_and_out_variants():
    x = torch.randn(4, 4)
    check(lambda t: t.clone().tril_(1), x)
    check(lambda t: t.clone().triu_(-1), x)
    check(lambda t: t.clone().cumsum_(0), x)
    check(lambda t: torch.cumsum(t, 1, out=torch.empty(0, device=t.device)), x, grad=False)
    check(lambda t: torch.triu(t, out=torch.empty(4, 4, device=t.device)), x, grad=False)
    check(lambda t: torch.eye(3, 4, device=t.device) + t[:3], x)
    check(lambda t: torch.sort(t, 1, out=(torch.empty(0, device=t.device),
                                          torch.empty(0, dtype=torch.long, device=t.device))),
          x, grad=False)


@pytest.mark.parametrize("dtype", ALL)
def test_scans(dtype):
    x = make((3, 6), dtype, -2, 3)
    if dtype != torch.bool:
        check(lambda t: (t.cumsum(1), t.cumsum(0), t.cumprod(1)), x, dtype=dtype)
        check(lambda t: (torch.cummax(t, 1), torch.cummin(t, 0)), x, dtype=dtype)
    else:
        check(lambda t: t.cumsum(1), x, dtype=dtype)
    if dtype.is_floating_point:
        check(lambda t: torch.logcumsumexp(t, 1), x, dtype=dtype)
        check(lambda t: t.cumsum(0, dtype=torch.float64), x, dtype=dtype)


def test_cummax_nan_and_ties():
    x = torch.tensor([[1., 3., 3., float("nan"), 2., float("nan")], [5., 5., 4., 6., 6., 0.]])
    check(lambda t: (torch.cummax(t, 1), torch.cummin(t, 1)), x, grad=False)


@pytest.mark.parametrize("dtype", ALL)
def test_sorts(dtype):
    x = make((4, 7), dtype)
    check(lambda t: torch.sort(t, dim=1, stable=True), x, dtype=dtype)
    check(lambda t: torch.sort(t, dim=0, descending=True, stable=True), x, dtype=dtype)
    check(lambda t: torch.argsort(t, dim=1, stable=True), x, dtype=dtype)
    if dtype != torch.bool:
        y = torch.randperm(28).reshape(4, 7).to(dtype)  # distinct: topk's ties are unordered
        check(lambda t: torch.topk(t, 3, 1), y, dtype=dtype)
        check(lambda t: torch.topk(t, 2, 0, largest=False), y, dtype=dtype)
        check(lambda t: torch.kthvalue(t, 3, 1), y, dtype=dtype)
        check(lambda t: (t.median(), t.median(1), t.median(0, keepdim=True)), y, dtype=dtype)
        check(lambda t: torch.mode(t, 1), make((4, 7), dtype, 0, 3), dtype=dtype)


def test_sort_nan_largest_and_nanmedian():
    x = torch.tensor([[2., float("nan"), -1., 5.], [float("nan"), float("nan"), 3., 0.]])
    check(lambda t: (torch.sort(t, dim=1, stable=True), torch.sort(t, dim=1, descending=True, stable=True)),
          x, grad=False)
    check(lambda t: (t.nanmedian(), t.nanmedian(1), t.median(1)), x, grad=False)


@pytest.mark.parametrize("dtype", ALL)
def test_reductions(dtype):
    x = make((3, 5), dtype)
    if dtype != torch.bool:  # eager has no argmin for bool
        check(lambda t: (t.argmin(), t.argmin(1), t.argmin(0, keepdim=True)), x, dtype=dtype)
    check(lambda t: (t.all(1), t.any(0), t.all(), t.any()), x, dtype=dtype)
    check(lambda t: torch.count_nonzero(t, 1), x, dtype=dtype)
    if dtype != torch.bool:
        check(lambda t: t.min(1), x, dtype=dtype)
    if dtype not in (torch.bool, torch.bfloat16):  # eager has no aminmax for bfloat16
        check(lambda t: (torch.aminmax(t), torch.aminmax(t, dim=0, keepdim=True)), x, dtype=dtype,
              grad=False)  # eager has no derivative for aminmax
        check(lambda t: (t.prod(), t.prod(1), t.prod(0, keepdim=True)), x, dtype=dtype)
        check(lambda t: (t.nansum(), t.nansum(1)), x, dtype=dtype)
    if dtype.is_floating_point:
        check(lambda t: (torch.var_mean(t, 1), torch.std_mean(t, 0, unbiased=False)), x,
              dtype=dtype)


def test_prod_with_zeros_backward():
    x = torch.tensor([[1., 0., 3.], [2., 4., 0.5], [0., 0., 2.]])
    check(lambda t: (t.prod(1), t.prod()), x)


# Indexing.
def test_advanced_index_and_put():
    x = torch.randn(4, 5, 6)
    i, j = torch.tensor([3, -1, 0]), torch.tensor([[0, 4], [2, 1]])
    for f in [lambda t: t[:, i.to(t.device)], lambda t: t[i.to(t.device), :, 1:3],
              lambda t: t[i.to(t.device), :, torch.tensor([5, 0, 2]).to(t.device)],
              lambda t: t[:, j.to(t.device), torch.tensor([1, 0]).to(t.device)],
              lambda t: t[..., torch.tensor([-1]).to(t.device)]]:
        check(f, x)
    for acc in (False, True):
        v = torch.randn(4, 3, 6)
        check(lambda t, v: t.index_put((torch.arange(4).to(t.device)[:, None],
                                       i.to(t.device)), v[:, :, 0], accumulate=acc), x[:, :, 0], v)
        w = torch.randn(3, 5, 6)
        check(lambda t, w: t.index_put((torch.tensor([1, 1, 3]).to(t.device),), w,
                                       accumulate=acc), x, w)


def test_bool_mask_index_reads_the_mask_once():
    x = torch.randn(5, 6)
    m = x > 0
    n0 = lazyx.metrics.counter_value("ShapeSync:index") or 0
    check(lambda t, mm: (t[mm], t[:, mm[0]]), x, m)
    assert (lazyx.metrics.counter_value("ShapeSync:index") or 0) > n0
    check(lambda t, mm: t.index_put((mm,), torch.arange(int(m.sum()), dtype=t.dtype,
                                                       device=t.device), accumulate=True), x, m)


@pytest.mark.parametrize("dtype", ALL)
def test_take_put_masked(dtype):
    x = make((3, 4), dtype)
    idx = torch.tensor([[0, -1], [5, 11]])
    check(lambda t: torch.take(t, idx.to(t.device)), x, dtype=dtype)
    src = make((4,), dtype)
    check(lambda t, s: t.put(torch.tensor([1, 1, -2, 0]).to(t.device), s,
                             accumulate=dtype != torch.bool), x, src, dtype=dtype)
    m = make((3, 4), torch.bool)
    check(lambda t, mm: torch.masked_select(t, mm), x, m, dtype=dtype)
    check(lambda t, mm, s: t.masked_scatter(mm, s), x, m, make((12,), dtype), dtype=dtype)
    check(lambda t: (torch.nonzero(t), torch.argwhere(t)), x, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique(dtype):
    x = make((20,), dtype, 0, 4)
    check(lambda t: torch.unique(t, return_inverse=True, return_counts=True), x, dtype=dtype,
          grad=False)
    check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x,
          dtype=dtype, grad=False)
    # Unsorted: eager's hash-set order, exactly.
    y = make((40,), dtype, -9, 9)
    check(lambda t: torch.unique(t, sorted=False, return_inverse=True, return_counts=True), y,
          dtype=dtype, grad=False)
    # Runs of equal rows (dim on a 2-D tensor).
    r = torch.stack([x[:4], x[:4], x[4:8], x[:4]])
    check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=0),
          r, dtype=dtype, grad=False)


def test_mode_and_nanmean_out_forms():
    """mode.values and nanmean.out: torch's own accept CPU tensors only."""
    x = make((4, 30), torch.int64, -3, 3)
    want = torch.mode(x, 1)
    v, i = torch.empty(0, dtype=torch.int64, device=DEV), torch.empty(0, dtype=torch.int64, device=DEV)
    torch.mode(x.to(DEV), 1, out=(v, i))
    same((want.values, want.indices), (v, i), torch.int64)
    f = make((3, 5), torch.float32)
    f[0, 1] = float("nan")
    o = torch.empty(0, device=DEV)
    torch.nanmean(f.to(DEV), 1, out=o)
    same(torch.nanmean(f, 1), o, torch.float32)
    assert not fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_mode_index_as_eager(dtype):
    """Eager reports the index at the end of the mode's run after its unstable sort: for lines
    longer than 16 that is not the last index holding the value."""
    x = make((3, 3000), dtype, -9, 10)
    check(lambda t: torch.mode(t, 1), x.round() if dtype.is_floating_point else x, dtype=dtype,
          grad=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_scatters(dtype):
    x = make((3, 5), dtype)
    idx = torch.tensor([[0, 1, 2, 0, 4], [1, 1, 0, 3, 3]])
    src = make((2, 5), dtype)
    check(lambda t: t.scatter(1, idx.to(t.device), 7), x, dtype=dtype)
    check(lambda t: t.clone().scatter_(0, idx[:, :3].to(t.device), 2), x, dtype=dtype)
    check(lambda t, s: t.scatter(1, idx.to(t.device), s, reduce="add"), x, src, dtype=dtype,
          grad=False)  # eager has no derivative for scatter with reduce
    for inc in (True, False):
        check(lambda t, s: t.scatter_reduce(1, idx.to(t.device), s, "sum", include_self=inc),
              x, src, dtype=dtype)
        if dtype.is_floating_point:
            check(lambda t, s: t.scatter_reduce(1, idx.to(t.device), s, "mean", include_self=inc),
                  x, src, dtype=dtype)
    for red in ("amax", "amin", "prod"):
        for inc in (True, False):
            check(lambda t, s: t.scatter_reduce(1, idx.to(t.device), s, red, include_self=inc),
                  x, src, dtype=dtype, grad=False)
            check(lambda t, s: t.index_reduce(0, torch.tensor([2, 0]).to(t.device), s, red,
                                              include_self=inc), x, src, dtype=dtype, grad=False)
    check(lambda t, s: t.scatter(1, idx.to(t.device), s, reduce="multiply"), x, src,
          dtype=dtype, grad=False)
    check(lambda t: t.index_fill(1, torch.tensor([0, -1]).to(t.device), torch.tensor(3)), x,
          dtype=dtype)


def test_repeat_interleave_bucketize_searchsorted_histc():
    x = torch.randn(3, 4)
    check(lambda t: (t.repeat_interleave(2, 0), t.repeat_interleave(
        torch.tensor([1, 0, 3, 2]).to(t.device), 1)), x)
    b = torch.tensor([-1., 0., 0.5, 2.])
    check(lambda t: (torch.bucketize(t, b.to(t.device)),
                     torch.bucketize(t, b.to(t.device), right=True, out_int32=True)), x)
    seq = torch.sort(torch.randn(3, 6), 1).values
    v = torch.cat([seq[:, :2], torch.randn(3, 3)], 1)
    check(lambda s, vv: (torch.searchsorted(s, vv), torch.searchsorted(s, vv, side="right")),
          seq, v, grad=False)
    check(lambda t: (torch.histc(t, 5), torch.histc(t, 4, -1, 1)), torch.rand(50) * 3, grad=False)


def test_multinomial_statistics():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    before = fallbacks()
    s = torch.multinomial(p.to(DEV), 4000, replacement=True).cpu()
    assert s.shape == (2, 4000) and s.dtype == torch.int64
    freq = torch.stack([torch.bincount(r, minlength=4).float() / 4000 for r in s])
    torch.testing.assert_close(freq, p, atol=0.03, rtol=0)
    assert (s[0] == 1).sum() == 0  # never a zero-probability category
    w = torch.multinomial(p.to(DEV), 3, replacement=False).cpu()
    assert all(len(set(r.tolist())) == 3 for r in w) and (w[0] != 1).all()
    first = torch.stack([torch.multinomial(p[0].to(DEV), 1) for _ in range(300)]).cpu()
    torch.testing.assert_close(torch.bincount(first.view(-1), minlength=4).float() / 300, p[0],
                               atol=0.08, rtol=0)
    assert fallbacks() == before


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    w = torch.randn(10, 3)
    i = torch.tensor([1, 2, 4, 5, 4, 3, 9])
    o = torch.tensor([0, 2, 2, 5])
    check(lambda ww: F.embedding_bag(i.to(ww.device), ww, o.to(ww.device), mode=mode), w)
    check(lambda ww: F.embedding_bag(i.to(ww.device), ww, o.to(ww.device), mode=mode,
                                     padding_idx=4), w)
    if mode == "sum":
        psw = torch.rand(7)
        check(lambda ww, p: F.embedding_bag(i.to(ww.device), ww, o.to(ww.device), mode=mode,
                                            per_sample_weights=p), w, psw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_losses(dtype):
    x, y = torch.rand(4, 5, dtype=dtype) * 0.9 + 0.05, torch.rand(4, 5, dtype=dtype)
    for red in ("none", "mean", "sum"):
        check(lambda a, b: F.binary_cross_entropy(a, b, reduction=red), x, y, dtype=dtype)
        check(lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=0.3), x * 2, y, dtype=dtype)
        check(lambda a, b: F.huber_loss(a, b, reduction=red, delta=0.4), x * 2, y, dtype=dtype)
        logits, tgt = torch.randn(2, 4, 3, 3, dtype=dtype), torch.randint(0, 4, (2, 3, 3))
        check(lambda a: F.cross_entropy(a, tgt.to(a.device), reduction=red, ignore_index=1),
              logits, dtype=dtype)
        t1 = torch.tensor([0, 4, 2, 2])
        check(lambda a: F.multi_margin_loss(a, t1.to(a.device), reduction=red), x, dtype=dtype)
        mw = torch.rand(5, dtype=dtype)
        check(lambda a: F.multi_margin_loss(a, t1.to(a.device), p=2, reduction=red,
                                            weight=mw.to(a.device)), x, dtype=dtype)
        tm = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [4, 3, 2, 1, 0], [-1, 1, 1, 1, 1]])
        check(lambda a: F.multilabel_margin_loss(a, tm.to(a.device), reduction=red), x,
              dtype=dtype)
    lg, lt = torch.randn(6, 5, dtype=dtype), torch.randint(0, 5, (6,))
    # Label smoothing reaches aten::bitwise_not (~mask, an elementwise op of another family).
    check(lambda a: F.cross_entropy(a, lt.to(a.device), label_smoothing=0.1), lg, dtype=dtype,
          allow=("aten::bitwise_not",))
    probs = torch.softmax(torch.randn(6, 5, dtype=dtype), 1)
    check(lambda a, p: F.cross_entropy(a, p, label_smoothing=0.2), lg, probs, dtype=dtype,
          allow=("aten::bitwise_not",))
    check(lambda a, p: F.cross_entropy(a, p), lg, probs, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vectors_and_distances(dtype):
    s, m, v = torch.randn(5, dtype=dtype), torch.randn(5, 3, dtype=dtype), torch.randn(3, dtype=dtype)
    check(lambda a, b, c: torch.addmv(a, b, c, beta=0.5, alpha=2), s, m, v, dtype=dtype)
    b1, b2 = torch.randn(2, 5, 3, dtype=dtype), torch.randn(2, 3, 4, dtype=dtype)
    check(lambda a, b, c: torch.addbmm(a, b, c, alpha=0.5), torch.randn(5, 4, dtype=dtype), b1, b2,
          dtype=dtype)
    check(lambda a, b: torch.vdot(a, b), s, s.flip(0).clone(), dtype=dtype)
    check(lambda a, b: torch.linalg.cross(a, b), torch.randn(4, 3, dtype=dtype),
          torch.randn(4, 3, dtype=dtype), dtype=dtype)
    x1, x2 = torch.randn(2, 4, 3, dtype=dtype), torch.randn(2, 5, 3, dtype=dtype)
    for p in (1.0, 2.0, 3.0, float("inf")):
        check(lambda a, b: torch.cdist(a, b, p=p), x1, x2, dtype=dtype)
        check(lambda a: F.pdist(a, p=p), x1[0], dtype=dtype)


def test_value_dependent_ops_keep_donation():
    x = torch.randn(8).to(DEV)
    lazyx.mark_step()
    x += 1
    lazyx.mark_step()
    n = torch.nonzero(x > 1).cpu()  # reads x: a partial sync
    x.mul_(2)
    lazyx.mark_step()
    assert lazyx.metrics.metric_data("InputOutputAliasCount")[2][-1] >= 1
    assert n.dim() == 2


def test_bad_input_errors():
    x = torch.randn(3, 4).to(DEV)
    with pytest.raises(Exception, match=r"\[topk\].*out of range"):
        torch.topk(x, 5, 1)
    with pytest.raises(Exception, match=r"\[kthvalue\]"):
        torch.kthvalue(x, 0, 1)
    with pytest.raises(Exception, match=r"out of range"):
        x[torch.tensor([7]).to(DEV)].cpu()


def test_gpt_generation_loop_without_fallback():
    torch.manual_seed(0)
    V, T, D = 11, 8, 16
    emb, head = torch.nn.Embedding(V, D).to(DEV), torch.nn.Linear(D, V).to(DEV)
    mask = torch.tril(torch.ones(T, T)).to(DEV)
    idx = torch.zeros(1, 1, dtype=torch.long).to(DEV)
    before = fallbacks()
    with torch.no_grad():
        for _ in range(6):
            cond = idx[:, -T:]
            t = cond.size(1)
            h = emb(cond)
            att = (h @ h.transpose(-2, -1)) * D ** -0.5
            att = att.masked_fill(mask[:t, :t] == 0, float("-inf")).softmax(-1)
            logits = head(att @ h)[:, -1, :]
            v, _ = torch.topk(logits, 4)
            logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1)
            assert (logits.gather(1, nxt) > -float("inf")).all()  # sampled from the top 4
            idx = torch.cat((idx, nxt), dim=1)
            lazyx.mark_step()
    assert idx.shape == (1, 7)
    assert fallbacks() == before
