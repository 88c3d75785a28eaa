"""Compositions without an IR op of their own (torch.equal, torch.isin) on the device against
CPU eager, in several dtypes, with no CPU fallback."""
import pytest
import torch

import lazyx

DEV = lazyx.device()
ALL = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


def fallbacks():
    return dict(lazyx.metrics.fallback_counters())


def make(shape, dtype):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    return torch.randint(-3, 4, shape).to(dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_equal_matches_eager(dtype):
    torch.manual_seed(0)
    a = make((3, 4), dtype)
    b = a.clone()
    c = a.clone()
    c[1, 2] = not bool(c[1, 2]) if dtype == torch.bool else c[1, 2] + 1
    before = fallbacks()
    cases = [(a, b), (a, c), (a, a.reshape(4, 3)), (a, a[:2]), (a[:0], b[:0]),
             (a, b.to(torch.float64))]
    for x, y in cases:
        got = torch.equal(x.to(DEV), y.to(DEV))
        assert isinstance(got, bool)
        assert got == torch.equal(x, y), (x.shape, y.shape, x.dtype, y.dtype)
    assert fallbacks() == before


def test_equal_nan_is_not_equal():
    x = torch.tensor([1.0, float("nan")])
    assert torch.equal(x.to(DEV), x.to(DEV)) == torch.equal(x, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint8])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_eager(dtype, invert):
    torch.manual_seed(1)
    x = make((4, 5), dtype)
    test = make((3,), dtype)
    before = fallbacks()
    got = torch.isin(x.to(DEV), test.to(DEV), invert=invert).cpu()
    assert torch.equal(got, torch.isin(x, test, invert=invert))
    got_s = torch.isin(x.to(DEV), 1, invert=invert).cpu()
    assert torch.equal(got_s, torch.isin(x, 1, invert=invert))
    empty = torch.isin(x.to(DEV), test[:0].to(DEV), invert=invert).cpu()
    assert torch.equal(empty, torch.isin(x, test[:0], invert=invert))
    assert fallbacks() == before


@pytest.mark.parametrize("dtype", [torch.bool, torch.bfloat16])
def test_isin_rejects_dtypes_eager_rejects(dtype):
    x = make((3,), dtype)
    with pytest.raises(RuntimeError):
        torch.isin(x, x)
    with pytest.raises(RuntimeError, match=r"\[isin\] unsupported input dtype"):
        torch.isin(x.to(DEV), x.to(DEV))
    with pytest.raises(RuntimeError, match=r"\[isin\] unsupported input dtype"):
        torch.isin(x.to(DEV), 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normal_tensor_overloads_statistics(dtype):
    torch.manual_seed(2)
    n = 20000
    mean = torch.full((n,), 3.0, dtype=dtype)
    std = torch.full((n,), 0.5, dtype=dtype)
    before = fallbacks()
    draws = [torch.normal(mean.to(DEV), 0.5), torch.normal(3.0, std.to(DEV)),
             torch.normal(mean.to(DEV), std.to(DEV))]
    for d in draws:
        assert d.dtype == dtype and d.shape == (n,)
        d = d.cpu().double()
        assert abs(d.mean().item() - 3.0) < 0.03
        assert abs(d.std().item() - 0.5) < 0.03
    # mean [n, 1] and std [2] broadcast to [n, 2]
    b = torch.normal(mean[:, None].to(DEV), torch.tensor([0.5, 2.0], dtype=dtype).to(DEV))
    assert b.shape == (n, 2)
    assert abs(b.cpu().double()[:, 1].std().item() - 2.0) < 0.1
    assert fallbacks() == before


def test_normal_mean_gradient_matches_eager():
    mean = torch.randn(5, requires_grad=True)
    md = mean.detach().to(DEV).requires_grad_()
    torch.normal(md, 1.0).sum().backward()
    torch.normal(mean, 1.0).sum().backward()
    assert torch.equal(md.grad.cpu(), mean.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_bernoulli_tensor_p_statistics(dtype):
    torch.manual_seed(3)
    p = torch.tensor([0.0, 0.25, 0.75, 1.0]).repeat(5000, 1)
    before = fallbacks()
    x = torch.empty(p.shape, dtype=dtype).to(DEV).bernoulli_(p.to(DEV)).cpu()
    assert x.dtype == dtype
    frac = x.double().mean(0)
    assert frac[0] == 0 and frac[3] == 1
    assert abs(frac[1] - 0.25) < 0.03 and abs(frac[2] - 0.75) < 0.03
    assert fallbacks() == before
    y = torch.bernoulli(p.to(DEV)).cpu()
    assert abs(y.mean(0)[1] - 0.25) < 0.03


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape,dim,size,step", [((7,), 0, 3, 2), ((4, 9), 1, 2, 3),
                                                 ((5, 6, 3), 1, 3, 1), ((5, 6), 0, 5, 1),
                                                 ((6, 4), -2, 1, 4), ((), 0, 1, 1)])
def test_unfold_backward_matches_eager(dtype, shape, dim, size, step):
    torch.manual_seed(4)
    x = torch.randn(shape).to(dtype).requires_grad_()
    xd = x.detach().to(DEV).requires_grad_()
    y = x.unfold(dim, size, step)
    w = torch.randn(y.shape).to(dtype)
    before = fallbacks()
    (xd.unfold(dim, size, step) * w.to(DEV)).sum().backward()
    assert fallbacks() == before
    (y * w).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 2.5), (3.5, -1, 0.7),
                                           (float("inf"), 2, 1.5), (2, 1, 100.0)])
def test_renorm_values_and_gradient_match_eager(dtype, p, dim, maxnorm):
    torch.manual_seed(5)
    x = (torch.randn(3, 4, 5) * 2).to(dtype).requires_grad_()
    xd = x.detach().to(DEV).requires_grad_()
    w = torch.randn(3, 4, 5).to(dtype)
    before = fallbacks()
    yd = torch.renorm(xd, p, dim, maxnorm)
    (yd * w.to(DEV)).sum().backward()
    assert fallbacks() == before
    y = torch.renorm(x, p, dim, maxnorm)
    (y * w).sum().backward()
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(yd.cpu(), y, **tol)
    torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol)
    z, zd = x.detach().clone(), x.detach().to(DEV)
    zd.renorm_(p, dim, maxnorm)
    torch.testing.assert_close(zd.cpu(), z.renorm_(p, dim, maxnorm), **tol)


def test_renorm_rejects_what_eager_rejects():
    with pytest.raises(RuntimeError, match=r"\[renorm\]"):
        torch.renorm(torch.ones(3).to(DEV), 2, 0, 1.0)
    with pytest.raises(RuntimeError, match=r"\[renorm\]"):
        torch.renorm(torch.ones(3, 3).to(DEV), 0, 0, 1.0)
