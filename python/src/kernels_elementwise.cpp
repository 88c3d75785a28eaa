// Kernels: elementwise arithmetic, comparisons, activations and their backward ops. A 0-dim
// CPU tensor operand (a Python number) becomes a run-time scalar, so changing it never
// recompiles.
#include <torch/library.h>

#include <cmath>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;

namespace {

Tensor add_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).add(cpu_scalar(b), to_lz(alpha)));
  if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(lz(b).mul(to_lz(alpha)).add(cpu_scalar(a)));
  return wrap(is_one(alpha) ? lz(a).add(lz(b)) : lz(a).add(lz(b), to_lz(alpha)));
}
Tensor& add__t(Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  if (is_cpu_scalar(b))
    t.add_(cpu_scalar(b), to_lz(alpha));
  else if (is_one(alpha))
    t.add_(lz(b));
  else
    t.add_(lz(b), to_lz(alpha));
  return a;
}
Tensor add_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  return wrap(lz(a).add(to_lz(b), to_lz(alpha)));
}
Tensor& add__s(Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  t.add_(to_lz(b), to_lz(alpha));
  return a;
}
Tensor sub_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).sub(cpu_scalar(b), to_lz(alpha)));
  if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(cpu_scalar(a) - lz(b).mul(to_lz(alpha)));
  return wrap(is_one(alpha) ? lz(a).sub(lz(b)) : lz(a).sub(lz(b), to_lz(alpha)));
}
Tensor& sub__t(Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  if (is_cpu_scalar(b))
    t.sub_(cpu_scalar(b), to_lz(alpha));
  else if (is_one(alpha))
    t.sub_(lz(b));
  else
    t.sub_(lz(b), to_lz(alpha));
  return a;
}
Tensor sub_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  return wrap(lz(a).sub(to_lz(b), to_lz(alpha)));
}
Tensor& sub__s(Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  t.sub_(to_lz(b), to_lz(alpha));
  return a;
}
// rsub(self, other, alpha) = other - alpha * self
Tensor rsub_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT x = is_one(alpha) ? lz(a) : lz(a).mul(to_lz(alpha));
  if (is_cpu_scalar(b)) return wrap(cpu_scalar(b) - x);
  return wrap(lz(b).sub(x));
}
Tensor rsub_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT x = is_one(alpha) ? lz(a) : lz(a).mul(to_lz(alpha));
  return wrap(to_lz(b) - x);
}

#define BINARY_TS(NAME, METHOD, OPERATOR)                                                         \
  Tensor NAME##_t(const Tensor& a, const Tensor& b) {                                             \
    if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).METHOD(cpu_scalar(b)));                \
    if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(cpu_scalar(a) OPERATOR lz(b));               \
    return wrap(lz(a).METHOD(lz(b)));                                                             \
  }                                                                                               \
  Tensor& NAME##__t(Tensor& a, const Tensor& b) {                                                 \
    LT t = lz(a);                                                                                 \
    if (is_cpu_scalar(b))                                                                         \
      t.METHOD##_(cpu_scalar(b));                                                                 \
    else                                                                                          \
      t.METHOD##_(lz(b));                                                                         \
    return a;                                                                                     \
  }                                                                                               \
  Tensor NAME##_s(const Tensor& a, const c10::Scalar& b) { return wrap(lz(a).METHOD(to_lz(b))); } \
  Tensor& NAME##__s(Tensor& a, const c10::Scalar& b) {                                            \
    LT t = lz(a);                                                                                 \
    t.METHOD##_(to_lz(b));                                                                        \
    return a;                                                                                     \
  }
BINARY_TS(mul, mul, *)
BINARY_TS(div, div, /)
#undef BINARY_TS

// Out variants (DDP's reducer writes grad / world_size into its bucket with mul.out).
Tensor& mul_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return write_out(out, lz(mul_t(a, b)));
}
Tensor& div_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return write_out(out, lz(div_t(a, b)));
}

// Eager refuses an integer tensor to a negative integer scalar power (the result is not an
// integer); a tensor exponent follows the engine's integer pow.
void check_int_pow(const Tensor& a, const c10::Scalar& e) {
  TORCH_CHECK(!(c10::isIntegralType(a.scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
}
}  // namespace

// pow with a scalar exponent of a floating tensor as eager's CPU kernel computes it: sqrt, rsqrt
// and 1 / x for 0.5, -0.5 and -1 (not in float16), x * x, x * x * x and 1 / (x * x) for 2, 3 and
// -2, pow otherwise. The results differ in the last bit, in signs of zero and at infinities.
LT pow_scalar(const LT& x, const c10::Scalar& e) {
  if (!lazyx::is_floating(x.dtype()) || e.isComplex() || e.isBoolean()) return x.pow(to_lz(e));
  const double v = e.toDouble();
  const bool roots = x.dtype() != lazyx::kFloat16;
  if (roots && v == 0.5) return x.sqrt();
  if (roots && v == -0.5) return x.rsqrt();
  if (roots && v == -1.0) return lazyx::Scalar(1.0) / x;  // as reciprocal
  if (!roots) return x.pow(to_lz(e));  // float16: eager computes in float32, rounds once
  if (v == 2.0) return x.mul(x);
  if (v == 3.0) return x.mul(x).mul(x);
  if (v == -2.0) return lazyx::Scalar(1.0) / x.mul(x);
  return x.pow(to_lz(e));
}

namespace {

Tensor pow_ts(const Tensor& a, const c10::Scalar& e) {
  check_int_pow(a, e);
  return wrap(pow_scalar(lz(a), e));
}
Tensor pow_tt(const Tensor& a, const Tensor& e) {
  if (is_cpu_scalar(e)) return wrap(lz(a).pow(cpu_scalar(e)));
  return wrap(lz(a).pow(lz(e)));
}
Tensor& pow__s(Tensor& a, const c10::Scalar& e) {
  check_int_pow(a, e);
  LT t = lz(a);
  if (lazyx::is_floating(t.dtype())) {
    t.copy_(pow_scalar(t, e));
  } else {
    t.pow_(to_lz(e));
  }
  return a;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return wrap(lazyx::maximum(lz(a), operand(b, lz(a))));
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return wrap(lazyx::minimum(lz(a), operand(b, lz(a))));
}
Tensor& maximum_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return write_out(out, lazyx::maximum(lz(a), operand(b, lz(a))));
}
Tensor& minimum_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return write_out(out, lazyx::minimum(lz(a), operand(b, lz(a))));
}
std::optional<lazyx::Scalar> opt(const optional<c10::Scalar>& s) {
  if (!s.has_value()) return std::nullopt;
  return to_lz(*s);
}
Tensor clamp(const Tensor& a, const optional<c10::Scalar>& lo, const optional<c10::Scalar>& hi) {
  return wrap(lz(a).clamp(opt(lo), opt(hi)));
}
Tensor& clamp_(Tensor& a, const optional<c10::Scalar>& lo, const optional<c10::Scalar>& hi) {
  LT t = lz(a);
  t.clamp_(opt(lo), opt(hi));
  return a;
}
Tensor clamp_min(const Tensor& a, const c10::Scalar& lo) {
  return wrap(lz(a).clamp(to_lz(lo), std::nullopt));
}
Tensor clamp_max(const Tensor& a, const c10::Scalar& hi) {
  return wrap(lz(a).clamp(std::nullopt, to_lz(hi)));
}
Tensor& clamp_min_(Tensor& a, const c10::Scalar& lo) {
  LT t = lz(a);
  t.clamp_(to_lz(lo), std::nullopt);
  return a;
}

Tensor where_self(const Tensor& c, const Tensor& a, const Tensor& b) {
  if (is_cpu_scalar(a) && !is_cpu_scalar(b)) return wrap(lazyx::where(lz(c), cpu_scalar(a), lz(b)));
  if (is_cpu_scalar(b) && !is_cpu_scalar(a)) return wrap(lazyx::where(lz(c), lz(a), cpu_scalar(b)));
  return wrap(lazyx::where(lz(c), lz(a), lz(b)));
}

// With integer operands eager truncates a floating `value` to an integer.
lazyx::Scalar addc_value(const Tensor& s, const Tensor& t1, const Tensor& t2,
                         const c10::Scalar& v) {
  const bool ints = c10::isIntegralType(s.scalar_type(), true) &&
                    c10::isIntegralType(t1.scalar_type(), true) &&
                    c10::isIntegralType(t2.scalar_type(), true);
  return ints && v.isFloatingPoint() ? to_lz(c10::Scalar(v.toLong())) : to_lz(v);
}
Tensor addcmul(const Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  return wrap(lz(s).add(lz(t1).mul(lz(t2)), addc_value(s, t1, t2, v)));
}
Tensor& addcmul_(Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  LT t = lz(s);
  t.add_(lz(t1).mul(lz(t2)), addc_value(s, t1, t2, v));
  return s;
}
Tensor addcdiv(const Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  return wrap(lz(s).add(lz(t1).div(lz(t2)), to_lz(v)));
}
Tensor& addcdiv_(Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  LT t = lz(s);
  t.add_(lz(t1).div(lz(t2)), to_lz(v));
  return s;
}
// Eager's formula (lazyx::lerp): from `end` back for |w| >= 0.5, so lerp(a, b, 1) is b exactly
// and infinities give eager's NaNs.
Tensor lerp_s(const Tensor& s, const Tensor& e, const c10::Scalar& w) {
  return wrap(lazyx::lerp(lz(s), lz(e), to_lz(w)));
}
Tensor& lerp__s(Tensor& s, const Tensor& e, const c10::Scalar& w) {
  LT a = lz(s);
  a.copy_(lazyx::lerp(a, lz(e), to_lz(w)));
  return s;
}

#define UNARY(NAME)                                           \
  Tensor NAME(const Tensor& a) { return wrap(lz(a).NAME()); } \
  Tensor& NAME##_(Tensor& a) {                                \
    LT t = lz(a);                                             \
    t.NAME##_();                                              \
    return a;                                                 \
  }
UNARY(neg)
UNARY(abs)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(rsqrt)
UNARY(tanh)
UNARY(sigmoid)
UNARY(relu)
UNARY(sin)
UNARY(cos)
#undef UNARY
Tensor logical_not(const Tensor& a) { return wrap(lz(a).logical_not()); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return wrap(lz(a).to(lazyx::kBool).logical_and(lz(b).to(lazyx::kBool)));
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return wrap(lz(a).to(lazyx::kBool).logical_or(lz(b).to(lazyx::kBool)));
}
// In place on a bool self (autograd's clamp and where masks): the result converts to self's dtype.
Tensor& logical_and_(Tensor& a, const Tensor& b) {
  LT t = lz(a);
  t.copy_(t.to(lazyx::kBool).logical_and(lz(b).to(lazyx::kBool)));
  return a;
}
Tensor& logical_or_(Tensor& a, const Tensor& b) {
  LT t = lz(a);
  t.copy_(t.to(lazyx::kBool).logical_or(lz(b).to(lazyx::kBool)));
  return a;
}
Tensor silu(const Tensor& a) {
  LT x = lz(a);
  return wrap(x.mul(x.sigmoid()));
}
Tensor silu_backward(const Tensor& g, const Tensor& a) {
  LT x = lz(a);
  LT s = x.sigmoid();
  return wrap(lz(g).mul(s.mul(x.mul(s.neg().add(1.0)).add(1.0))));
}

#define COMPARE(NAME)                                                                           \
  Tensor NAME##_s(const Tensor& a, const c10::Scalar& b) { return wrap(lz(a).NAME(to_lz(b))); } \
  Tensor NAME##_t(const Tensor& a, const Tensor& b) {                                           \
    if (is_cpu_scalar(b)) return wrap(lz(a).NAME(cpu_scalar(b)));                               \
    return wrap(lz(a).NAME(lz(b)));                                                             \
  }
COMPARE(eq)
COMPARE(ne)
COMPARE(lt)
COMPARE(le)
COMPARE(gt)
COMPARE(ge)
#undef COMPARE

// Activations and their backward ops.
Tensor gelu(const Tensor& a, c10::string_view approximate) {
  return wrap(lz(a).gelu(approximate == "tanh"));
}
Tensor gelu_backward(const Tensor& grad, const Tensor& self, c10::string_view approximate) {
  LT x = lz(self), g = lz(grad);
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    LT x2 = x.mul(x);
    LT inner = x.add(x2.mul(x), c).mul(k);
    LT t = inner.tanh();
    LT left_d = t.add(1.0).mul(0.5);
    LT inner_d = x2.mul(3.0 * c).add(1.0).mul(k);
    LT right_d = x.mul(0.5).mul(t.mul(t).neg().add(1.0)).mul(inner_d);
    return wrap(g.mul(left_d.add(right_d)));
  }
  // d/dx x*Phi(x) = Phi(x) + x*phi(x); Phi(x) = gelu(x)/x (0.5 at x = 0).
  LT cdf = lazyx::where(x.eq(0.0), lazyx::Scalar(0.5), x.gelu(false).div(x));
  LT pdf = x.mul(x).mul(-0.5).exp().mul(1.0 / std::sqrt(2.0 * M_PI));
  return wrap(g.mul(cdf.add(x.mul(pdf))));
}
Tensor threshold_backward(const Tensor& grad, const Tensor& self, const c10::Scalar& th) {
  return wrap(lazyx::where(lz(self).le(to_lz(th)), lazyx::Scalar(0.0), lz(grad)));
}
Tensor sigmoid_backward(const Tensor& grad, const Tensor& out) {
  LT y = lz(out);
  return wrap(lz(grad).mul(y.mul(y.neg().add(1.0))));
}
Tensor tanh_backward(const Tensor& grad, const Tensor& out) {
  LT y = lz(out);
  return wrap(lz(grad).mul(y.mul(y).neg().add(1.0)));
}

// NaN test and reciprocal (sign: kernels_math.cpp).
Tensor isnan_k(const Tensor& a) {
  LT x = lz(a);
  return wrap(x.ne(x));
}
Tensor reciprocal(const Tensor& a) {
  LT x = lz(a);
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);
  return wrap(lazyx::Scalar(1.0) / x);
}
Tensor& reciprocal_(Tensor& a) {
  LT t = lz(a);
  t.copy_(lazyx::Scalar(1.0) / t);
  return a;
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "add.Tensor", LZ_FN(add_t));
  impl(m, "add_.Tensor", LZ_FN(add__t));
  impl(m, "add.Scalar", LZ_FN(add_s));
  impl(m, "add_.Scalar", LZ_FN(add__s));
  impl(m, "sub.Tensor", LZ_FN(sub_t));
  impl(m, "sub_.Tensor", LZ_FN(sub__t));
  impl(m, "sub.Scalar", LZ_FN(sub_s));
  impl(m, "sub_.Scalar", LZ_FN(sub__s));
  impl(m, "rsub.Tensor", LZ_FN(rsub_t));
  impl(m, "rsub.Scalar", LZ_FN(rsub_s));
  impl(m, "mul.Tensor", LZ_FN(mul_t));
  impl(m, "mul_.Tensor", LZ_FN(mul__t));
  impl(m, "mul.Scalar", LZ_FN(mul_s));
  impl(m, "mul_.Scalar", LZ_FN(mul__s));
  impl(m, "div.Tensor", LZ_FN(div_t));
  impl(m, "div_.Tensor", LZ_FN(div__t));
  impl(m, "div.Scalar", LZ_FN(div_s));
  impl(m, "div_.Scalar", LZ_FN(div__s));
  impl(m, "mul.out", LZ_FN(mul_out));
  impl(m, "div.out", LZ_FN(div_out));
  impl(m, "pow.Tensor_Scalar", LZ_FN(pow_ts));
  impl(m, "pow.Tensor_Tensor", LZ_FN(pow_tt));
  impl(m, "pow_.Scalar", LZ_FN(pow__s));
  impl(m, "maximum", LZ_FN(maximum));
  impl(m, "minimum", LZ_FN(minimum));
  impl(m, "maximum.out", LZ_FN(maximum_out));
  impl(m, "minimum.out", LZ_FN(minimum_out));
  impl(m, "clamp", LZ_FN(clamp));
  impl(m, "clamp_", LZ_FN(clamp_));
  impl(m, "clamp_min", LZ_FN(clamp_min));
  impl(m, "clamp_max", LZ_FN(clamp_max));
  impl(m, "clamp_min_", LZ_FN(clamp_min_));
  impl(m, "where.self", LZ_FN(where_self));
  impl(m, "addcmul", LZ_FN(addcmul));
  impl(m, "addcmul_", LZ_FN(addcmul_));
  impl(m, "addcdiv", LZ_FN(addcdiv));
  impl(m, "addcdiv_", LZ_FN(addcdiv_));
  impl(m, "lerp.Scalar", LZ_FN(lerp_s));
  impl(m, "lerp_.Scalar", LZ_FN(lerp__s));
#define REG_UNARY(NAME)       \
  impl(m, #NAME, LZ_FN(NAME)); \
  impl(m, #NAME "_", LZ_FN(NAME##_));
  REG_UNARY(neg)
  REG_UNARY(abs)
  REG_UNARY(exp)
  REG_UNARY(log)
  REG_UNARY(sqrt)
  REG_UNARY(rsqrt)
  REG_UNARY(tanh)
  REG_UNARY(sigmoid)
  REG_UNARY(relu)
  REG_UNARY(sin)
  REG_UNARY(cos)
#undef REG_UNARY
  impl(m, "logical_not", LZ_FN(logical_not));
  impl(m, "logical_and", LZ_FN(logical_and));
  impl(m, "logical_or", LZ_FN(logical_or));
  impl(m, "logical_and_", LZ_FN(logical_and_));
  impl(m, "logical_or_", LZ_FN(logical_or_));
  impl(m, "silu", LZ_FN(silu));
  impl(m, "silu_backward", LZ_FN(silu_backward));
#define REG_CMP(NAME)                       \
  impl(m, #NAME ".Scalar", LZ_FN(NAME##_s)); \
  impl(m, #NAME ".Tensor", LZ_FN(NAME##_t));
  REG_CMP(eq)
  REG_CMP(ne)
  REG_CMP(lt)
  REG_CMP(le)
  REG_CMP(gt)
  REG_CMP(ge)
#undef REG_CMP
  impl(m, "gelu", LZ_FN(gelu));
  impl(m, "gelu_backward", LZ_FN(gelu_backward));
  impl(m, "threshold_backward", LZ_FN(threshold_backward));
  impl(m, "sigmoid_backward", LZ_FN(sigmoid_backward));
  impl(m, "tanh_backward", LZ_FN(tanh_backward));
  impl(m, "isnan", LZ_FN(isnan_k));
  impl(m, "reciprocal", LZ_FN(reciprocal));
  impl(m, "reciprocal_", LZ_FN(reciprocal_));
}

}  // namespace

}  // namespace lazyx_bridge
