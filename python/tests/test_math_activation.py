"""Math ops and activations on the device against CPU eager: values and gradients in float32,
float64 and bfloat16 (and integer dtypes where eager has them), in place and out=, with no
op falling back to CPU; activations inside nn.Module training steps."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()
FLOATS = [torch.float32, torch.float64, torch.bfloat16]


def fallbacks():
    return sorted(n for n in lazyx.metrics.counter_names() if n.startswith("aten::"))


@pytest.fixture(autouse=True)
def no_fallback():
    lazyx.metrics.clear_counters()
    yield
    assert fallbacks() == [], lazyx.metrics.fallback_counters()


def tol(dtype):
    return {torch.float32: (2e-5, 1e-6), torch.float64: (1e-12, 1e-14),
            torch.bfloat16: (1.6e-2, 1e-3)}.get(dtype, (0, 0))


def check(got, want, rtol=None):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol0, atol = tol(want.dtype)
    rtol = rtol or rtol0
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)


def inputs(kind, dtype, shape=(4, 5)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "unit":
        x = torch.tanh(x) * 0.99
    elif kind == "pos":
        x = x.abs() + 0.1
    elif kind == "gt1":
        x = x.abs() + 1.1
    elif kind == "wide":
        x = x * 4
    x = x.to(dtype)
    if kind == "wide" and dtype.is_floating_point:
        x.view(-1)[:4] = torch.tensor([0.0, -0.0, 2.5, -1.5], dtype=dtype)
    return x


UNARY = [
    ("floor", torch.floor, "wide"), ("ceil", torch.ceil, "wide"), ("trunc", torch.trunc, "wide"),
    ("round", torch.round, "wide"), ("frac", torch.frac, "wide"), ("sign", torch.sign, "wide"),
    ("sgn", torch.sgn, "wide"), ("log1p", torch.log1p, "pos"), ("expm1", torch.expm1, "any"),
    ("log2", torch.log2, "pos"), ("log10", torch.log10, "pos"), ("exp2", torch.exp2, "any"),
    ("erf", torch.erf, "any"), ("erfc", torch.erfc, "any"), ("erfinv", torch.erfinv, "unit"),
    ("tan", torch.tan, "unit"), ("asin", torch.asin, "unit"), ("acos", torch.acos, "unit"),
    ("atan", torch.atan, "wide"), ("sinh", torch.sinh, "any"), ("cosh", torch.cosh, "any"),
    ("asinh", torch.asinh, "wide"), ("acosh", torch.acosh, "gt1"), ("atanh", torch.atanh, "unit"),
    ("sinc", torch.sinc, "wide"), ("lgamma", torch.lgamma, "pos"), ("digamma", torch.digamma, "pos"),
    ("i0", torch.i0, "any"), ("i0e", torch.special.i0e, "wide"), ("i1", torch.special.i1, "any"),
    ("i1e", torch.special.i1e, "wide"), ("ndtri", torch.special.ndtri, "unit"),
    ("log_ndtr", torch.special.log_ndtr, "wide"), ("erfcx", torch.special.erfcx, "wide"),
    ("entr", torch.special.entr, "pos"), ("ndtr", torch.special.ndtr, "wide"),
    ("polygamma1", lambda x: torch.polygamma(1, x), "pos"),
    ("polygamma3", lambda x: torch.polygamma(3, x), "pos"),
    ("logit", lambda x: torch.logit(x, 1e-6), "unit"), ("xlogy", lambda x: torch.xlogy(x, 2.5), "any"),
    ("nan_to_num", torch.nan_to_num, "wide"), ("signbit", torch.signbit, "wide"),
    ("angle", torch.angle, "wide"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn,kind", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_and_gradients(name, fn, kind, dtype):
    if dtype == torch.bfloat16 and name in ("erfinv", "ndtri", "i0e", "i1", "i1e", "log_ndtr",
                                            "erfcx", "polygamma1", "polygamma3", "entr", "digamma",
                                            "lgamma", "i0", "ndtr"):
        pytest.skip("eager has no bfloat16 kernel")
    if kind == "unit" and name == "ndtri":
        x0 = (inputs(kind, torch.float64) + 1) / 2
        x0 = x0.to(dtype)
    else:
        x0 = inputs(kind, dtype)
    x = x0.clone().requires_grad_(True)
    want = fn(x)
    xd = x0.to(DEV).requires_grad_(True)
    got = fn(xd)
    loose = dtype == torch.float64 and name in ("digamma", "polygamma1", "polygamma3")
    check(got, want.detach(), rtol=1e-8 if name.startswith("polygamma") and loose else None)
    if want.requires_grad and dtype != torch.bfloat16:
        (gw,) = torch.autograd.grad(want.sum(), x)
        (gd,) = torch.autograd.grad(got.sum(), xd)
        # Eager's trigamma (digamma's and polygamma's gradients) is accurate to about 1e-9.
        check(gd, gw, rtol=1e-8 if loose else None)
    lazyx.mark_step()


IN_PLACE = ["neg_", "floor_", "ceil_", "trunc_", "round_", "frac_", "sign_", "sgn_", "log1p_", "expm1_",
            "log2_", "log10_", "exp2_", "erf_", "erfc_", "tan_", "atan_", "sinh_", "cosh_",
            "asinh_", "sinc_", "i0_", "nan_to_num_", "logical_not_"]


@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_and_out(name):
    x = inputs("wide", torch.float32)
    xd = x.to(DEV)
    getattr(x, name)()
    getattr(xd, name)()
    check(xd, x)
    base = name[:-1]
    if base == "logical_not":
        return
    fn = getattr(torch, base)
    y = inputs("pos", torch.float32)
    out_c = torch.empty(0)
    out_d = torch.empty(0, device=DEV)
    fn(y, out=out_c)
    fn(y.to(DEV), out=out_d)
    check(out_d, out_c)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_dtypes(dtype):
    a = torch.tensor([[-7, 7, 12, 0], [5, -3, 9, 100]]).to(dtype)
    if dtype == torch.uint8:
        a = a.abs().to(dtype)
    b = torch.tensor([2, -3, 5, 7]).to(dtype)
    if dtype == torch.uint8:
        b = b.abs().to(dtype)
    ad, bd = a.to(DEV), b.to(DEV)
    for fn in [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor, torch.remainder, torch.fmod,
               torch.floor_divide, lambda x, y: torch.div(x, y, rounding_mode="trunc"),
               lambda x, y: torch.div(x, y, rounding_mode="floor"), torch.logical_xor,
               lambda x, y: x % 3, lambda x, y: x & 6, lambda x, y: 5 | y, torch.atan2,
               torch.copysign, lambda x, y: torch.clamp(x, min=y), torch.maximum]:
        check(fn(ad, bd), fn(a, b))
    for fn in [torch.bitwise_not, torch.floor, torch.ceil, torch.round, torch.trunc, torch.sign,
               torch.signbit, torch.log1p, torch.erf, torch.isposinf, torch.nan_to_num]:
        check(fn(ad), fn(a))


def test_bool_ops():
    a = torch.tensor([True, False, True, False])
    b = torch.tensor([True, True, False, False])
    ad, bd = a.to(DEV), b.to(DEV)
    for fn in [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor, torch.logical_xor,
               lambda x, y: x ^ y, lambda x, y: ~x]:
        check(fn(ad, bd), fn(a, b))


BINARY = [
    ("atan2", torch.atan2), ("hypot", torch.hypot), ("copysign", torch.copysign),
    ("fmod", torch.fmod), ("remainder", torch.remainder), ("floor_divide", torch.floor_divide),
    ("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc")),
    ("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor")),
    ("logaddexp", torch.logaddexp), ("logaddexp2", torch.logaddexp2), ("xlogy", torch.xlogy),
    ("xlog1py", torch.special.xlog1py), ("heaviside", torch.heaviside),
    ("nextafter", torch.nextafter), ("lerp", lambda x, y: torch.lerp(x, y, torch.full_like(x, 0.7))),
    ("clamp", lambda x, y: torch.clamp(x, min=y, max=y + 1)), ("clamp_min", torch.clamp_min),
    ("clamp_max", torch.clamp_max), ("pow_scalar_base", lambda x, y: torch.pow(2.5, y)),
    ("fmax", lambda x, y: torch.fmax(x, torch.where(y < -1.0, torch.nan, y))),
    ("fmin", lambda x, y: torch.fmin(torch.where(x > 2.0, torch.nan, x), y)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_values_and_gradients(name, fn, dtype):
    if dtype == torch.bfloat16 and name in ("nextafter",):
        pytest.skip("eager has no bfloat16 kernel")
    a0 = inputs("wide", dtype, (3, 4))
    b0 = inputs("pos", dtype, (4,)) * (1 if name in ("xlogy", "xlog1py") else -1)
    if name in ("heaviside", "nextafter"):
        b0 = b0.expand(3, 4).contiguous()
    a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
    want = fn(a, b)
    ad, bd = a0.to(DEV).requires_grad_(True), b0.to(DEV).requires_grad_(True)
    got = fn(ad, bd)
    check(got, want.detach())
    no_grad = ("fmod", "remainder", "floor_divide", "heaviside", "nextafter", "div_trunc",
               "div_floor")
    if want.requires_grad and dtype != torch.bfloat16 and name not in no_grad:
        gw = torch.autograd.grad(want.sum(), (a, b), allow_unused=True)
        gd = torch.autograd.grad(got.sum(), (ad, bd), allow_unused=True)
        for w, d in zip(gw, gd):
            if w is not None:
                check(d, w)
    lazyx.mark_step()


def test_comparisons_in_place_and_out():
    a = inputs("wide", torch.float32)
    ad = a.to(DEV)
    for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
        x, xd = a.clone(), ad.clone()
        getattr(x, name + "_")(0.5)
        getattr(xd, name + "_")(0.5)
        check(xd, x)
        getattr(x, name + "_")(a)
        getattr(xd, name + "_")(ad)
        check(xd, x)
        oc, od = torch.empty(0, dtype=torch.bool), torch.empty(0, dtype=torch.bool, device=DEV)
        getattr(torch, name)(a, 0.25, out=oc)
        getattr(torch, name)(ad, 0.25, out=od)
        check(od, oc)


ACTIVATIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)), ("elu", F.elu), ("selu", F.selu),
    ("celu", lambda x: F.celu(x, 0.7)), ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.75)),
    ("relu6", F.relu6), ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid),
    ("mish", F.mish), ("softplus", lambda x: F.softplus(x, 2.0, 3.0)), ("glu", F.glu),
    ("logsigmoid", F.logsigmoid), ("silu", F.silu), ("softshrink", lambda x: F.softshrink(x, 0.6)),
    ("hardshrink", lambda x: F.hardshrink(x, 0.6)), ("threshold", lambda x: F.threshold(x, 0.3, -2.0)),
    ("rrelu_eval", lambda x: F.rrelu(x, training=False)),
    ("prelu", lambda x: F.prelu(x, torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5], dtype=x.dtype, device=x.device))),
    ("tanhshrink", F.tanhshrink), ("softsign", F.softsign),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_values_and_gradients(name, fn, dtype):
    x0 = inputs("wide", dtype, (4, 6) if name == "glu" else (4, 5))
    x = x0.clone().requires_grad_(True)
    xd = x0.to(DEV).requires_grad_(True)
    if dtype != torch.bfloat16 or name in ("tanhshrink", "softsign"):  # eager's compositions
        want = fn(x)
        (gw,) = torch.autograd.grad(want.sum(), x)
    else:  # the device computes 16-bit activations in float32 and rounds once
        x32 = x0.float().requires_grad_(True)
        want = fn(x32)
        (gw,) = torch.autograd.grad(want.sum(), x32)
        want, gw = want.to(dtype), gw.to(dtype)
    got = fn(xd)
    check(got, want.detach())
    (gd,) = torch.autograd.grad(got.sum(), xd)
    check(gd, gw)
    lazyx.mark_step()


@pytest.mark.parametrize("inplace_fn", [
    lambda x: F.leaky_relu(x, 0.2, inplace=True), lambda x: F.elu(x, inplace=True),
    lambda x: F.hardtanh(x, inplace=True), lambda x: F.hardswish(x, inplace=True),
    lambda x: F.hardsigmoid(x, inplace=True), lambda x: F.silu(x, inplace=True),
    lambda x: F.mish(x, inplace=True), lambda x: F.threshold(x, 0.1, 5.0, inplace=True),
    lambda x: F.selu(x, inplace=True), lambda x: F.celu(x, inplace=True),
    lambda x: F.relu6(x, inplace=True)])
def test_activation_in_place(inplace_fn):
    x = inputs("wide", torch.float32)
    xd = x.to(DEV)
    inplace_fn(x)
    inplace_fn(xd)
    check(xd, x)


def test_rrelu_training_draws_slopes_in_range():
    x = -torch.rand(200) - 0.1
    y = F.rrelu(x.to(DEV), 0.1, 0.3, training=True).cpu()
    slope = y / x
    assert bool(((slope >= 0.1 - 1e-6) & (slope <= 0.3 + 1e-6)).all())
    assert slope.std() > 0.01  # not one slope for all


@pytest.mark.parametrize("act", [nn.LeakyReLU(0.05), nn.ELU(), nn.SELU(), nn.Hardswish(),
                                 nn.Hardsigmoid(), nn.Mish(), nn.Softplus(), nn.SiLU(), nn.PReLU(8),
                                 nn.ReLU6(), nn.LogSigmoid(), nn.Hardtanh(), nn.CELU()],
                         ids=lambda a: type(a).__name__)
def test_activation_in_training_steps(act):
    import copy
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), act, nn.Linear(8, 3))
    model_d = copy.deepcopy(model).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(model_d.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(16, 6, generator=g) * 2
        y = torch.randn(16, 3, generator=g)
        for m, o, dev in ((model, opt, "cpu"), (model_d, opt_d, DEV)):
            o.zero_grad()
            loss = F.mse_loss(m(x.to(dev)), y.to(dev))
            loss.backward()
            o.step()
        lazyx.mark_step()
    for p, pd in zip(model.parameters(), model_d.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", [torch.floor_divide, torch.remainder, torch.fmod,
                                lambda a, b: torch.div(a, b, rounding_mode="trunc")])
def test_integer_division_by_zero_raises(fn):
    # Eager raises ZeroDivisionError at the call; the device raises when the value is computed.
    a = torch.tensor([5, -5], device=DEV)
    with pytest.raises(RuntimeError, match="integer division by zero"):
        fn(a, torch.tensor([1, 0], device=DEV)).cpu()
    assert fn(a, torch.tensor([2, 3], device=DEV)).cpu().tolist() == \
        fn(a.cpu(), torch.tensor([2, 3])).tolist()


def test_bitwise_on_floats_is_a_clear_error():
    with pytest.raises(Exception, match=r"\[bitwise_and\]"):
        torch.bitwise_and(torch.ones(2, device=DEV), torch.ones(2, device=DEV))
    lazyx.metrics.clear_counters()
