// The math free functions (lazyx/math.h): native IR math ops where one exists, compositions of
// ops (written for the edge cases PyTorch defines) elsewhere.
#include <cmath>
#include <limits>

#include "ir/math_ops.h"
#include "lazyx/math.h"
#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

#define LAZYX_LOCK EngineLock lock_(engine_mutex())

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;

Dtype float_of(Dtype d) { return is_floating(d) ? d : kFloat32; }

Tensor unary_float(Op op, const char* name, const Tensor& t, ir::Attrs attrs = {}) {
  LAZYX_LOCK;
  Arg a = arg(name, t);
  return make_tensor(ir::make_node(op, float_of(a.dtype), a.shape(), {a.node}, std::move(attrs)));
}

Tensor special(ir::Special id, const char* name, const Tensor& t, int64_t order = 0) {
  ir::Attrs attrs;
  attrs.i0 = static_cast<int64_t>(id);
  if (id == ir::Special::Polygamma) attrs.ints = {order};
  return unary_float(Op::SpecialFn, name, t, std::move(attrs));
}

// Rounding ops: integers and bool stay as they are (a copy).
Tensor rounding(Op op, const char* name, const Tensor& t) {
  LAZYX_LOCK;
  Arg a = arg(name, t);
  if (!is_floating(a.dtype)) return t.clone();
  return make_tensor(ir::make_node(op, a.dtype, a.shape(), {a.node}));
}

enum class Kind { Float, Same, Bitwise, FloatOnly };

// A host Scalar operand becomes a run-time scalar node: a new value does not recompile.
Tensor binary_args(Op op, const char* name, const Arg& x, const Arg& y, Kind kind,
                   ir::Attrs attrs = {}) {
  Dtype rt = promote({x, y});
  if (kind == Kind::Bitwise) {
    if (is_floating(rt)) {
      ir::fail(name, std::string("dtype ") + dtype_name(rt) +
                         " is not supported; use integral or bool tensors.");
    }
  } else if (kind == Kind::FloatOnly) {
    if (!is_floating(rt)) {
      ir::fail(name, std::string("dtype ") + dtype_name(rt) +
                         " is not supported; use floating-point tensors.");
    }
  } else if (kind == Kind::Float) {
    rt = float_of(rt);
  } else if (rt == kBool) {
    ir::fail(name, "bool tensors are not supported; convert them to an integer dtype first.");
  }
  Shape shape = ir::broadcast_shapes(name, x.shape(), y.shape());
  return make_tensor(
      ir::make_node(op, rt, std::move(shape), {node_of(x, rt), node_of(y, rt)}, std::move(attrs)));
}
Tensor binary(Op op, const char* name, const Tensor& a, const Tensor& b, Kind kind,
              ir::Attrs attrs = {}) {
  LAZYX_LOCK;
  return binary_args(op, name, arg(name, a), arg(name, b), kind, std::move(attrs));
}
Tensor binary(Op op, const char* name, const Tensor& a, Scalar b, Kind kind, ir::Attrs attrs = {}) {
  LAZYX_LOCK;
  return binary_args(op, name, arg(name, a), arg(b), kind, std::move(attrs));
}
Tensor binary(Op op, const char* name, Scalar a, const Tensor& b, Kind kind, ir::Attrs attrs = {}) {
  LAZYX_LOCK;
  return binary_args(op, name, arg(a), arg(name, b), kind, std::move(attrs));
}

// SpecialFn2 `id`: both operands in their promoted floating dtype (integers give float32).
ir::Attrs special2_attrs(ir::Special2 id) {
  ir::Attrs attrs;
  attrs.i0 = static_cast<int64_t>(id);
  return attrs;
}

// A Scalar operand as a 0-d tensor of the dtype the pair promotes to.
Tensor lift(const Tensor& t, Scalar s) {
  Dtype d;
  {
    LAZYX_LOCK;
    d = promote({arg("math", t), arg(s)});
  }
  return scalar_tensor(s, d);
}

Tensor isnan_t(const Tensor& x) { return x.ne(x); }

}  // namespace

Tensor floor(const Tensor& x) { return rounding(Op::Floor, "floor", x); }
Tensor ceil(const Tensor& x) { return rounding(Op::Ceil, "ceil", x); }
Tensor trunc(const Tensor& x) { return rounding(Op::Trunc, "trunc", x); }
Tensor round(const Tensor& x, int64_t decimals) {
  if (decimals == 0) return rounding(Op::Round, "round", x);
  if (!is_floating(x.dtype())) ir::fail("round", "decimals need a floating-point tensor.");
  // As eager: scale by 10^|decimals|, round half to even, scale back.
  double p = std::pow(10.0, static_cast<double>(decimals > 0 ? decimals : -decimals));
  if (decimals > 0) return rounding(Op::Round, "round", x.mul(p)).div(p);
  return rounding(Op::Round, "round", x.div(p)).mul(p);
}
Tensor frac(const Tensor& x) {
  if (!is_floating(x.dtype())) ir::fail("frac", "needs a floating-point tensor.");
  return x.sub(trunc(x));
}
Tensor sign(const Tensor& x) {
  if (x.dtype() == kBool) return x.clone();
  // NaN gives 0, as PyTorch's sign does.
  return x.gt(0).to(x.dtype()).sub(x.lt(0).to(x.dtype()));
}
Tensor signbit(const Tensor& x) {
  if (x.dtype() == kBool) return zeros(x.shape(), kBool);
  if (!is_floating(x.dtype())) return x.lt(0);
  return copysign(Scalar(1.0), x).lt(0);
}

#define LAZYX_UNARY(fn, OP) \
  Tensor fn(const Tensor& x) { return unary_float(Op::OP, #fn, x); }
LAZYX_UNARY(log1p, Log1p)
LAZYX_UNARY(expm1, Expm1)
LAZYX_UNARY(log2, Log2)
LAZYX_UNARY(log10, Log10)
LAZYX_UNARY(exp2, Exp2)
LAZYX_UNARY(erf, Erf)
LAZYX_UNARY(erfc, Erfc)
LAZYX_UNARY(erfinv, Erfinv)
LAZYX_UNARY(tan, Tan)
LAZYX_UNARY(asin, Asin)
LAZYX_UNARY(acos, Acos)
LAZYX_UNARY(atan, Atan)
LAZYX_UNARY(sinh, Sinh)
LAZYX_UNARY(cosh, Cosh)
LAZYX_UNARY(asinh, Asinh)
LAZYX_UNARY(acosh, Acosh)
LAZYX_UNARY(atanh, Atanh)
#undef LAZYX_UNARY

Tensor sinc(const Tensor& x) {
  // Integers in float32; 16-bit floats in float32, rounded once (PyTorch's opmath type).
  const Dtype d = x.dtype();
  const bool half = d == kFloat16 || d == kBFloat16;
  Tensor xf = is_floating(d) && !half ? x : x.to(kFloat32);
  Tensor px = xf.mul(kPi);
  Tensor r = where(xf.eq(0), Scalar(1.0), px.sin().div(px));
  return half ? r.to(d) : r;
}

Tensor isinf(const Tensor& x) {
  if (!is_floating(x.dtype())) return zeros(x.shape(), kBool);
  return x.abs().eq(kInfD);
}
Tensor isposinf(const Tensor& x) {
  if (!is_floating(x.dtype())) return zeros(x.shape(), kBool);
  return x.eq(kInfD);
}
Tensor isneginf(const Tensor& x) {
  if (!is_floating(x.dtype())) return zeros(x.shape(), kBool);
  return x.eq(-kInfD);
}
Tensor isfinite(const Tensor& x) {
  if (!is_floating(x.dtype())) return ones(x.shape(), kBool);
  return x.sub(x).eq(0);
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return x.clone();
  double hi = std::numeric_limits<float>::max();
  if (x.dtype() == kFloat64) hi = std::numeric_limits<double>::max();
  if (x.dtype() == kFloat16) hi = 65504.0;
  if (x.dtype() == kBFloat16) hi = 3.3895313892515355e38;
  Tensor r = where(x.eq(kInfD), Scalar(posinf.value_or(hi)), x);
  r = where(x.eq(-kInfD), Scalar(neginf.value_or(-hi)), r);
  return where(isnan_t(x), Scalar(nan.value_or(0.0)), r);
}

#define LAZYX_BINARY_NATIVE(fn, OP, KIND)                                                 \
  Tensor fn(const Tensor& a, const Tensor& b) { return binary(Op::OP, #fn, a, b, KIND); } \
  Tensor fn(const Tensor& a, Scalar b) { return binary(Op::OP, #fn, a, b, KIND); }        \
  Tensor fn(Scalar a, const Tensor& b) { return binary(Op::OP, #fn, a, b, KIND); }
LAZYX_BINARY_NATIVE(atan2, Atan2, Kind::Float)
LAZYX_BINARY_NATIVE(hypot, Hypot, Kind::Float)
LAZYX_BINARY_NATIVE(copysign, Copysign, Kind::Float)
LAZYX_BINARY_NATIVE(fmod, Fmod, Kind::Same)
LAZYX_BINARY_NATIVE(remainder, Remainder, Kind::Same)
LAZYX_BINARY_NATIVE(floor_divide, FloorDiv, Kind::Same)
LAZYX_BINARY_NATIVE(trunc_divide, TruncDiv, Kind::Same)
LAZYX_BINARY_NATIVE(bitwise_and, BitwiseAnd, Kind::Bitwise)
LAZYX_BINARY_NATIVE(bitwise_or, BitwiseOr, Kind::Bitwise)
LAZYX_BINARY_NATIVE(bitwise_xor, BitwiseXor, Kind::Bitwise)
LAZYX_BINARY_NATIVE(nextafter, Nextafter, Kind::FloatOnly)
#undef LAZYX_BINARY_NATIVE

#define LAZYX_BINARY_SCALARS(fn)                                     \
  Tensor fn(const Tensor& a, Scalar b) { return fn(a, lift(a, b)); } \
  Tensor fn(Scalar a, const Tensor& b) { return fn(lift(b, a), b); }
LAZYX_BINARY_SCALARS(logical_xor)
LAZYX_BINARY_SCALARS(logaddexp)
LAZYX_BINARY_SCALARS(logaddexp2)
LAZYX_BINARY_SCALARS(xlogy)
LAZYX_BINARY_SCALARS(xlog1py)
LAZYX_BINARY_SCALARS(heaviside)
#undef LAZYX_BINARY_SCALARS

Tensor bitwise_not(const Tensor& x) {
  LAZYX_LOCK;
  Arg a = arg("bitwise_not", x);
  check_dtype("bitwise_not", a.dtype, true, true, false);
  return make_tensor(ir::make_node(Op::BitwiseNot, a.dtype, a.shape(), {a.node}));
}

Tensor logical_xor(const Tensor& a, const Tensor& b) { return a.to(kBool).ne(b.to(kBool)); }

namespace {
// Both operands in their promoted floating dtype.
std::pair<Tensor, Tensor> float_pair(const char* name, const Tensor& a, const Tensor& b) {
  Dtype d;
  {
    LAZYX_LOCK;
    d = float_of(promote({arg(name, a), arg(name, b)}));
  }
  return {a.to(d), b.to(d)};
}
}  // namespace

// max + log1p(exp(-|a - b|)); equal infinities give themselves (their difference is NaN).
Tensor logaddexp(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = float_pair("logaddexp", a0, b0);
  Tensor m = maximum(a, b);
  Tensor r = m.add(log1p(a.sub(b).abs().neg().exp()));
  return where(isinf(a).logical_and(a.eq(b)), a, r);
}
Tensor logaddexp2(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = float_pair("logaddexp2", a0, b0);
  Tensor m = maximum(a, b);
  Tensor r = m.add(log1p(exp2(a.sub(b).abs().neg())).mul(1.0 / std::log(2.0)));
  return where(isinf(a).logical_and(a.eq(b)), a, r);
}
Tensor xlogy(const Tensor& x0, const Tensor& y0) {
  auto [x, y] = float_pair("xlogy", x0, y0);
  Tensor r = where(x.eq(0), Scalar(0.0), x.mul(y.log()));
  return where(isnan_t(y), Scalar(NAN), r);
}
Tensor xlog1py(const Tensor& x0, const Tensor& y0) {
  auto [x, y] = float_pair("xlog1py", x0, y0);
  Tensor r = where(x.eq(0), Scalar(0.0), x.mul(log1p(y)));
  return where(isnan_t(y), Scalar(NAN), r);
}
Tensor heaviside(const Tensor& x, const Tensor& v) {
  Dtype d;
  {
    LAZYX_LOCK;
    d = promote({arg("heaviside", x), arg("heaviside", v)});
  }
  return where(x.eq(0), v.to(d), x.gt(0).to(d));
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  Tensor d = b.sub(a);
  return where(w.abs().lt(0.5), a.add(w.mul(d)), b.sub(d.mul(Scalar(1.0) - w)));
}
Tensor lerp(const Tensor& a, const Tensor& b, Scalar w) {
  double x = w.to_double();
  Tensor d = b.sub(a);
  return std::fabs(x) < 0.5 ? a.add(d.mul(w)) : b.sub(d.mul(1.0 - x));
}

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  if (!lo.defined() && !hi.defined())
    ir::fail("clamp", "at least one of min and max must be given.");
  Tensor r = lo.defined() ? maximum(x, lo) : x;
  return hi.defined() ? minimum(r, hi) : r;
}

using S = ir::Special;
Tensor lgamma(const Tensor& x) { return special(S::Lgamma, "lgamma", x); }
Tensor digamma(const Tensor& x) { return special(S::Digamma, "digamma", x); }
Tensor polygamma(int64_t n, const Tensor& x) {
  if (n < 0) ir::fail("polygamma", "n must be non-negative, got " + std::to_string(n) + ".");
  return special(S::Polygamma, "polygamma", x, n);
}
Tensor i0(const Tensor& x) { return special(S::I0, "i0", x); }
Tensor i0e(const Tensor& x) { return special(S::I0e, "i0e", x); }
Tensor i1(const Tensor& x) { return special(S::I1, "i1", x); }
Tensor i1e(const Tensor& x) { return special(S::I1e, "i1e", x); }
Tensor ndtri(const Tensor& x) { return special(S::Ndtri, "ndtri", x); }
Tensor log_ndtr(const Tensor& x) { return special(S::LogNdtr, "log_ndtr", x); }
Tensor erfcx(const Tensor& x) { return special(S::Erfcx, "erfcx", x); }
Tensor bessel_j0(const Tensor& x) { return special(S::BesselJ0, "bessel_j0", x); }
Tensor bessel_j1(const Tensor& x) { return special(S::BesselJ1, "bessel_j1", x); }
Tensor bessel_y0(const Tensor& x) { return special(S::BesselY0, "bessel_y0", x); }
Tensor bessel_y1(const Tensor& x) { return special(S::BesselY1, "bessel_y1", x); }
Tensor modified_bessel_i0(const Tensor& x) {
  return special(S::ModBesselI0, "modified_bessel_i0", x);
}
Tensor modified_bessel_i1(const Tensor& x) {
  return special(S::ModBesselI1, "modified_bessel_i1", x);
}
Tensor modified_bessel_k0(const Tensor& x) {
  return special(S::ModBesselK0, "modified_bessel_k0", x);
}
Tensor modified_bessel_k1(const Tensor& x) {
  return special(S::ModBesselK1, "modified_bessel_k1", x);
}
Tensor scaled_modified_bessel_k0(const Tensor& x) {
  return special(S::ScaledModBesselK0, "scaled_modified_bessel_k0", x);
}
Tensor scaled_modified_bessel_k1(const Tensor& x) {
  return special(S::ScaledModBesselK1, "scaled_modified_bessel_k1", x);
}
Tensor spherical_bessel_j0(const Tensor& x) {
  return special(S::SphericalBesselJ0, "spherical_bessel_j0", x);
}
Tensor airy_ai(const Tensor& x) { return special(S::AiryAi, "airy_ai", x); }

#define LAZYX_SPECIAL2(fn, ID)                                                 \
  Tensor fn(const Tensor& a, const Tensor& b) {                                \
    return binary(Op::SpecialFn2, #fn, a, b, Kind::Float, special2_attrs(ID)); \
  }                                                                            \
  Tensor fn(const Tensor& a, Scalar b) {                                       \
    return binary(Op::SpecialFn2, #fn, a, b, Kind::Float, special2_attrs(ID)); \
  }                                                                            \
  Tensor fn(Scalar a, const Tensor& b) {                                       \
    return binary(Op::SpecialFn2, #fn, a, b, Kind::Float, special2_attrs(ID)); \
  }
using S2 = ir::Special2;
LAZYX_SPECIAL2(chebyshev_polynomial_t, S2::ChebyshevT)
LAZYX_SPECIAL2(chebyshev_polynomial_u, S2::ChebyshevU)
LAZYX_SPECIAL2(chebyshev_polynomial_v, S2::ChebyshevV)
LAZYX_SPECIAL2(chebyshev_polynomial_w, S2::ChebyshevW)
LAZYX_SPECIAL2(shifted_chebyshev_polynomial_t, S2::ShiftedChebyshevT)
LAZYX_SPECIAL2(shifted_chebyshev_polynomial_u, S2::ShiftedChebyshevU)
LAZYX_SPECIAL2(shifted_chebyshev_polynomial_v, S2::ShiftedChebyshevV)
LAZYX_SPECIAL2(shifted_chebyshev_polynomial_w, S2::ShiftedChebyshevW)
LAZYX_SPECIAL2(hermite_polynomial_h, S2::HermiteH)
LAZYX_SPECIAL2(hermite_polynomial_he, S2::HermiteHe)
LAZYX_SPECIAL2(laguerre_polynomial_l, S2::LaguerreL)
LAZYX_SPECIAL2(legendre_polynomial_p, S2::LegendreP)
LAZYX_SPECIAL2(zeta, S2::Zeta)
LAZYX_SPECIAL2(igamma, S2::Igamma)
LAZYX_SPECIAL2(igammac, S2::Igammac)
#undef LAZYX_SPECIAL2

Tensor entr(const Tensor& x0) {
  Tensor x = is_floating(x0.dtype()) ? x0 : x0.to(kFloat32);
  Tensor pos = x.mul(x.log()).neg();
  Tensor r = where(x.gt(0), pos, where(x.eq(0), Scalar(0.0), full({}, -kInfD, x.dtype())));
  return where(isnan_t(x), x, r);
}
Tensor ndtr(const Tensor& x) { return erfc(x.mul(-1.0 / std::sqrt(2.0))).mul(0.5); }

std::pair<Tensor, Tensor> frexp(const Tensor& x) {
  if (!is_floating(x.dtype())) {
    ir::fail("frexp", std::string("expected a floating point input, got ") +
                          dtype_name(x.dtype()) + "; convert it with .to(float32) first.");
  }
  // The exponent is computed in x's dtype, which holds each of its own exponents exactly.
  Tensor e = special(S::FrexpExponent, "frexp", x).to(kInt32);
  return {special(S::FrexpMantissa, "frexp", x), e};
}

}  // namespace lazyx
