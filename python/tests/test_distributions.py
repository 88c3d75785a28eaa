"""In-place sampling (exponential_, cauchy_, log_normal_, geometric_) on the device: the same
distribution as eager's, by quantiles of 200,000 draws each, and eager's argument checks. (The
OpInfo harness compares only shapes for these: one sample's mean and std is too noisy for heavy
tails, and the Cauchy distribution has neither.)"""
import pytest
import torch

import lazyx

DEV = lazyx.device()
N = 200_000
QS = torch.tensor([0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99], dtype=torch.float64)

CASES = [
    ("exponential_", (1.5,)),
    ("exponential_", (0.2,)),
    ("cauchy_", (0.5, 2.0)),
    ("log_normal_", (0.5, 0.3)),
    ("geometric_", (0.75,)),
    ("geometric_", (0.05,)),
]


@pytest.mark.parametrize("name,args", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_quantiles_match_eager(name, args, dtype):
    torch.manual_seed(0)
    want = getattr(torch.empty(N, dtype=dtype), name)(*args).double()
    got = getattr(torch.empty(N, dtype=dtype, device=DEV), name)(*args).cpu().double()
    assert got.dtype == want.dtype and got.isfinite().all()
    qw, qg = torch.quantile(want, QS), torch.quantile(got, QS)
    # Quantiles of 200,000 draws agree to a few standard errors; 16-bit dtypes round them.
    spread = (torch.quantile(want, QS + 0.005) - torch.quantile(want, QS - 0.005)).abs()
    tol = spread + (qw.abs() * 0.01 if dtype == torch.bfloat16 else 0)
    assert ((qg - qw).abs() <= tol + 1e-6).all(), (name, args, qw.tolist(), qg.tolist())
    if name == "geometric_":  # integer counts from 1
        assert (got >= 1).all() and torch.equal(got, got.floor())
    lazyx.metrics.clear_all()
    getattr(torch.empty(8, device=DEV), name)(*args)
    assert not [k for k in lazyx.metrics.counter_names() if k.startswith("aten::")]


@pytest.mark.parametrize("name,args", [("exponential_", (0.0,)), ("cauchy_", (0.0, -1.0)),
                                       ("log_normal_", (0.0, -1.0)), ("geometric_", (1.5,))])
def test_bad_parameters_raise_as_eager(name, args):
    with pytest.raises(RuntimeError):
        getattr(torch.empty(4), name)(*args)
    with pytest.raises(RuntimeError, match=rf"\[{name}\] expects"):
        getattr(torch.empty(4, device=DEV), name)(*args)
