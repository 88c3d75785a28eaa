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
