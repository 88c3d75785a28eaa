"""grid_sample, frexp, segment_reduce and histogram on the device against CPU eager: values and
gradients, float32 and float64, with no CPU fallback."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tol(dtype):
    return dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-9)


def check(f, *inputs, grad=(), dtype=torch.float32):
    """f on CPU and on the device: equal outputs, equal gradients of the inputs at positions
    `grad` (through autograd, with a random output gradient), and no fallback."""
    lazyx.metrics.clear_counters()
    xc = [x.clone().requires_grad_(i in grad) for i, x in enumerate(inputs)]
    xd = [x.to(DEV).requires_grad_(i in grad) for i, x in enumerate(inputs)]
    yc, yd = f(*xc), f(*xd)
    yc = tuple(yc) if isinstance(yc, (tuple, list)) else (yc,)
    yd = tuple(yd) if isinstance(yd, (tuple, list)) else (yd,)
    assert len(yc) == len(yd)
    for a, b in zip(yc, yd):
        assert b.device == DEV and b.shape == a.shape and b.dtype == a.dtype
        torch.testing.assert_close(b.cpu(), a.detach(), equal_nan=True, **tol(dtype))
    if grad:
        g = torch.randn(yc[0].shape, dtype=yc[0].dtype)
        (yc[0] * g).sum().backward()
        (yd[0] * g.to(DEV)).sum().backward()
        lazyx.mark_step()
        for i in grad:
            torch.testing.assert_close(xd[i].grad.cpu(), xc[i].grad, **tol(dtype))
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,padding,align", list(itertools.product(
    ["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"], [False, True])))
def test_grid_sample(dtype, mode, padding, align):
    x = torch.randn(2, 3, 5, 7, dtype=dtype)
    grid = torch.rand(2, 4, 6, 2, dtype=dtype) * 3 - 1.5  # inside and outside [-1, 1]
    grad = (0,) if mode == "nearest" else (0, 1)
    check(lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding, align_corners=align),
          x, grid, grad=grad, dtype=dtype)


@pytest.mark.parametrize("shape,out", [((1, 1, 1, 1), (1, 3, 3)), ((3, 2, 8, 4), (3, 1, 9)),
                                       ((2, 4, 16, 16), (2, 16, 16))])
def test_grid_sample_shapes_and_affine_grid(shape, out):
    x = torch.randn(*shape)
    theta = torch.tensor([[0.8, -0.3, 0.1], [0.25, 0.9, -0.2]]).expand(shape[0], 2, 3)
    grid = F.affine_grid(theta, (shape[0], shape[1], out[1], out[2]), align_corners=False)
    check(lambda a, g: F.grid_sample(a, g, align_corners=False), x, grid, grad=(0, 1))


def test_grid_sample_input_gradient_only():
    x, grid = torch.randn(2, 2, 6, 6), torch.rand(2, 5, 5, 2) * 2 - 1
    check(lambda a, g: F.grid_sample(a, g, padding_mode="border"), x, grid, grad=(0,))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bfloat16])
def test_frexp(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -0.75, 3.0, 1e-3, -2.5e4, float("inf"), -float("inf"),
                      float("nan")], dtype=dtype)
    x = torch.cat([x, torch.randn(40, dtype=dtype) * 100])
    lazyx.metrics.clear_counters()
    m, e = torch.frexp(x.to(DEV))
    mc, ec = torch.frexp(x)
    assert e.dtype == torch.int32 and m.dtype == dtype
    torch.testing.assert_close(m.cpu(), mc, equal_nan=True, atol=0, rtol=0)
    torch.testing.assert_close(e.cpu(), ec, atol=0, rtol=0)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()


@pytest.mark.parametrize("dtype", DTYPES)
def test_frexp_subnormals_out_and_backward(dtype):
    tiny = torch.finfo(dtype).tiny
    x = torch.tensor([tiny / 3, tiny / 1024, tiny, 5.0], dtype=dtype)
    check(torch.frexp, x, dtype=dtype)
    m, e = torch.empty(0, dtype=dtype, device=DEV), torch.empty(0, dtype=torch.int32, device=DEV)
    torch.frexp(x.to(DEV), out=(m, e))
    torch.testing.assert_close(m.cpu(), torch.frexp(x)[0], atol=0, rtol=0)
    check(lambda t: torch.frexp(t)[0], torch.randn(7, 3, dtype=dtype), grad=(0,), dtype=dtype)


SEGMENT_CASES = [
    ((6,), 0, [2, 0, 4], False),
    ((6, 3), 0, [1, 2, 3], False),
    ((10, 2, 3), 0, [1, 2, 0, 6, 0], True),  # lengths sum to 9 < 10
    ((4, 5), 1, [[0, 1, 2, 2], [2, 0, 3, 0], [5, 0, 0, 0], [1, 1, 1, 2]], False),
    ((3, 5, 2), 1, [[0, 1, 2, 2], [2, 0, 3, 0], [3, 0, 2, 0]], False),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", SEGMENT_CASES)
@pytest.mark.parametrize("initial", [None, 2])
@pytest.mark.parametrize("kind", ["lengths", "offsets"])
def test_segment_reduce(dtype, reduce, case, initial, kind):
    shape, axis, lengths, unsafe = case
    x = torch.randn(*shape, dtype=dtype)
    if reduce in ("max", "min"):
        x = x.round()  # ties: eager shares a positive gradient among them
    lengths = torch.tensor(lengths)
    kw = dict(axis=axis, unsafe=unsafe, initial=initial)
    if kind == "lengths":
        kw["lengths"] = lengths
    else:
        z = list(lengths.shape)
        z[axis] = 1
        kw["offsets"] = torch.cat([lengths.new_zeros(z), lengths], axis).cumsum(axis)

    def f(t):
        k = {n: (v.to(t.device) if isinstance(v, torch.Tensor) else v) for n, v in kw.items()}
        return torch.segment_reduce(t, reduce, **k)
    check(f, x, grad=(0,), dtype=dtype)


def test_segment_reduce_bad_lengths_raise_when_run():
    x = torch.randn(5, device=DEV)
    y = torch.segment_reduce(x, "sum", lengths=torch.tensor([2, 2], device=DEV))
    with pytest.raises(Exception, match="segment_reduce.*sum to 4"):
        y.cpu()
    y = torch.segment_reduce(x, "sum", lengths=torch.tensor([2, 2], device=DEV), unsafe=True)
    want = torch.segment_reduce(x.cpu(), "sum", lengths=torch.tensor([2, 2]), unsafe=True)
    torch.testing.assert_close(y.cpu(), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (4, 6), (3, 1, 5), (3, 0, 2)])
@pytest.mark.parametrize("bins", [1, 3, 7])
@pytest.mark.parametrize("weighted,density", [(False, False), (True, False), (False, True),
                                              (True, True)])
def test_histogram_bin_count(dtype, shape, bins, weighted, density):
    x = torch.randn(shape, dtype=dtype)
    w = torch.rand(shape, dtype=dtype) if weighted else None

    def f(t, *wt):
        return torch.histogram(t, bins, weight=wt[0] if wt else None, density=density)
    check(f, x, *([w] if weighted else []), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_histogram_bins_tensor_range_and_ties(dtype):
    x = torch.randn(50, dtype=dtype)
    for edges in [torch.linspace(-1, 1, 6), torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0]),
                  torch.randn(5), torch.tensor([0.5, -1.0, 2.0, 0.0, 1.5])]:
        edges = edges.to(dtype)
        check(lambda t, e: torch.histogram(t, e), x, edges, dtype=dtype)
        check(lambda t, e: torch.histogram(t, e, density=True), x, edges, dtype=dtype)
    check(lambda t: torch.histogram(t, 4, range=(-0.5, 2.0)), x, dtype=dtype)
    check(lambda t: torch.histogram(t, 3), torch.full((6,), 2.5, dtype=dtype), dtype=dtype)
    xs = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 0.5], dtype=dtype)  # on the edges
    check(lambda t: torch.histogram(t, 4), xs, dtype=dtype)
