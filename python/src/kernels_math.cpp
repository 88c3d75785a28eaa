// Kernels: elementwise math (rounding, logarithms, error and special functions, trigonometric,
// division variants, bitwise ops, comparisons in place and out=), each with its in-place and
// out= variants. A Python number operand stays a scalar in PyTorch's type promotion.
#include "kernels_math.h"

#include <torch/library.h>

#include <cmath>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::where;

at::Tensor& math_inplace(at::Tensor& self, const LT& r) {
  TORCH_CHECK(c10::canCast(to_at(r.dtype()), self.scalar_type()), "result type ", to_at(r.dtype()),
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(r.shape() == lazyx::Shape(self.sizes().begin(), self.sizes().end()),
              "output with shape ", self.sizes(), " doesn't match the broadcast shape");
  LT t = lz(self);
  t.copy_(r);
  return self;
}

at::Tensor& math_out(at::Tensor& out, const LT& r) {
  if (to_at(r.dtype()) == out.scalar_type()) return write_out(out, r);
  TORCH_CHECK(c10::canCast(to_at(r.dtype()), out.scalar_type()), "result type ", to_at(r.dtype()),
              " can't be cast to the desired output type ", out.scalar_type());
  return write_out(out, r.to(to_lz(out.scalar_type())));
}

namespace {

// Unary ops: functional, in place and out=.
#define UNARY_FO(NAME, EXPR)                       \
  Tensor NAME##_f(const Tensor& a) {               \
    LT x = lz(a);                                  \
    return wrap(EXPR);                             \
  }                                                \
  Tensor& NAME##_o(const Tensor& a, Tensor& out) { \
    LT x = lz(a);                                  \
    return math_out(out, EXPR);                    \
  }
#define UNARY(NAME, EXPR)         \
  UNARY_FO(NAME, EXPR)            \
  Tensor& NAME##_i(Tensor& a) {   \
    LT x = lz(a);                 \
    return math_inplace(a, EXPR); \
  }
UNARY(floor, lazyx::floor(x))
UNARY(ceil, lazyx::ceil(x))
UNARY(trunc, lazyx::trunc(x))
UNARY(round, lazyx::round(x))
UNARY(frac, lazyx::frac(x))
UNARY(sign, lazyx::sign(x))
UNARY(log1p, lazyx::log1p(x))
UNARY(expm1, lazyx::expm1(x))
UNARY(log2, lazyx::log2(x))
UNARY(log10, lazyx::log10(x))
UNARY(exp2, lazyx::exp2(x))
UNARY(erf, lazyx::erf(x))
UNARY(erfc, lazyx::erfc(x))
UNARY(erfinv, lazyx::erfinv(x))
UNARY(tan, lazyx::tan(x))
UNARY(asin, lazyx::asin(x))
UNARY(acos, lazyx::acos(x))
UNARY(atan, lazyx::atan(x))
UNARY(sinh, lazyx::sinh(x))
UNARY(cosh, lazyx::cosh(x))
UNARY(asinh, lazyx::asinh(x))
UNARY(acosh, lazyx::acosh(x))
UNARY(atanh, lazyx::atanh(x))
UNARY(sinc, lazyx::sinc(x))
UNARY(lgamma, lazyx::lgamma(x))
UNARY(digamma, lazyx::digamma(x))
UNARY(i0, lazyx::i0(x))
UNARY(bitwise_not, lazyx::bitwise_not(x))
UNARY_FO(signbit, lazyx::signbit(x))
UNARY_FO(isposinf, lazyx::isposinf(x))
UNARY_FO(isneginf, lazyx::isneginf(x))
UNARY_FO(special_i0e, lazyx::i0e(x))
UNARY_FO(special_i1, lazyx::i1(x))
UNARY_FO(special_i1e, lazyx::i1e(x))
UNARY_FO(special_ndtri, lazyx::ndtri(x))
UNARY_FO(special_log_ndtr, lazyx::log_ndtr(x))
UNARY_FO(special_erfcx, lazyx::erfcx(x))
UNARY_FO(special_entr, lazyx::entr(x))
UNARY_FO(special_bessel_j0, lazyx::bessel_j0(x))
UNARY_FO(special_bessel_j1, lazyx::bessel_j1(x))
UNARY_FO(special_bessel_y0, lazyx::bessel_y0(x))
UNARY_FO(special_bessel_y1, lazyx::bessel_y1(x))
UNARY_FO(special_modified_bessel_i0, lazyx::modified_bessel_i0(x))
UNARY_FO(special_modified_bessel_i1, lazyx::modified_bessel_i1(x))
UNARY_FO(special_modified_bessel_k0, lazyx::modified_bessel_k0(x))
UNARY_FO(special_modified_bessel_k1, lazyx::modified_bessel_k1(x))
UNARY_FO(special_scaled_modified_bessel_k0, lazyx::scaled_modified_bessel_k0(x))
UNARY_FO(special_scaled_modified_bessel_k1, lazyx::scaled_modified_bessel_k1(x))
UNARY_FO(special_spherical_bessel_j0, lazyx::spherical_bessel_j0(x))
#undef UNARY
#undef UNARY_FO

Tensor& logical_not_i(Tensor& a) { return math_inplace(a, lz(a).logical_not()); }
Tensor& logical_not_o(const Tensor& a, Tensor& out) { return math_out(out, lz(a).logical_not()); }
Tensor round_d(const Tensor& a, int64_t d) { return wrap(lazyx::round(lz(a), d)); }
Tensor& round_d_i(Tensor& a, int64_t d) { return math_inplace(a, lazyx::round(lz(a), d)); }
Tensor& round_d_o(const Tensor& a, int64_t d, Tensor& out) {
  return math_out(out, lazyx::round(lz(a), d));
}
Tensor polygamma_f(int64_t n, const Tensor& a) { return wrap(lazyx::polygamma(n, lz(a))); }
Tensor& polygamma_i(Tensor& a, int64_t n) { return math_inplace(a, lazyx::polygamma(n, lz(a))); }
Tensor& polygamma_o(int64_t n, const Tensor& a, Tensor& out) {
  return math_out(out, lazyx::polygamma(n, lz(a)));
}
LT nan_to_num_lz(const Tensor& a, optional<double> nan, optional<double> pinf,
                 optional<double> ninf) {
  auto o = [](optional<double> v) { return v ? std::optional<double>(*v) : std::nullopt; };
  return lazyx::nan_to_num(lz(a), o(nan), o(pinf), o(ninf));
}
Tensor nan_to_num_f(const Tensor& a, optional<double> n, optional<double> p, optional<double> q) {
  return wrap(nan_to_num_lz(a, n, p, q));
}
Tensor& nan_to_num_i(Tensor& a, optional<double> n, optional<double> p, optional<double> q) {
  return math_inplace(a, nan_to_num_lz(a, n, p, q));
}
Tensor& nan_to_num_o(const Tensor& a, optional<double> n, optional<double> p, optional<double> q,
                     Tensor& out) {
  return math_out(out, nan_to_num_lz(a, n, p, q));
}

// fmax/fmin: a NaN operand gives the other one.
LT fmax_lz(const Tensor& a, const Tensor& b, bool is_max) {
  LT x = lz(a), y = is_cpu_scalar(b) ? lazyx::full({}, cpu_scalar(b), x.dtype()) : lz(b);
  LT m = is_max ? lazyx::maximum(x, y) : lazyx::minimum(x, y);
  if (!lazyx::is_floating(m.dtype())) return m;
  return where(x.ne(x), y.to(m.dtype()), where(y.ne(y), x.to(m.dtype()), m));
}
Tensor fmax_f(const Tensor& a, const Tensor& b) { return wrap(fmax_lz(a, b, true)); }
Tensor fmin_f(const Tensor& a, const Tensor& b) { return wrap(fmax_lz(a, b, false)); }
Tensor& fmax_o(const Tensor& a, const Tensor& b, Tensor& out) {
  return math_out(out, fmax_lz(a, b, true));
}
Tensor& fmin_o(const Tensor& a, const Tensor& b, Tensor& out) {
  return math_out(out, fmax_lz(a, b, false));
}
// angle of a real number: pi below zero, else 0 (NaN stays NaN); integers give float32.
LT angle_lz(const Tensor& a) {
  LT x = lz(a);
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);
  LT r = where(x.lt(0), lazyx::Scalar(M_PI), lazyx::zeros({}, x.dtype()));
  return where(x.ne(x), x, r);
}
Tensor angle_f(const Tensor& a) { return wrap(angle_lz(a)); }
Tensor& angle_o(const Tensor& a, Tensor& out) { return math_out(out, angle_lz(a)); }
Tensor& neg_o(const Tensor& a, Tensor& out) { return math_out(out, lz(a).neg()); }

// The zero gradient of sgn/sign (eager's ZeroTensor): an ordinary tensor of zeros here.
Tensor efficient_zero(c10::IntArrayRef size, optional<at::ScalarType> dtype, optional<at::Layout>,
                      optional<at::Device>, optional<bool>) {
  return wrap(lazyx::zeros(to_shape(size), default_dtype(dtype)));
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "_efficientzerotensor", LZ_FN(efficient_zero));
  impl(m, "fmax", LZ_FN(fmax_f));
  impl(m, "fmin", LZ_FN(fmin_f));
  impl(m, "fmax.out", LZ_FN(fmax_o));
  impl(m, "fmin.out", LZ_FN(fmin_o));
  impl(m, "angle", LZ_FN(angle_f));
  impl(m, "angle.out", LZ_FN(angle_o));
  impl(m, "neg.out", LZ_FN(neg_o));  // neg and neg_ are in kernels_elementwise.cpp
#define REG_FO(NAME)              \
  impl(m, #NAME, LZ_FN(NAME##_f)); \
  impl(m, #NAME ".out", LZ_FN(NAME##_o));
#define REG(NAME) \
  REG_FO(NAME)    \
  impl(m, #NAME "_", LZ_FN(NAME##_i));
  REG(floor)
  REG(ceil)
  REG(trunc) REG(round) REG(frac) REG(sign) REG(log1p) REG(expm1) REG(log2) REG(log10) REG(exp2)
      REG(erf) REG(erfc) REG(erfinv) REG(tan) REG(asin) REG(acos) REG(atan) REG(sinh) REG(cosh) REG(
          asinh) REG(acosh) REG(atanh) REG(sinc) REG(lgamma) REG(digamma) REG(i0) REG(bitwise_not)
          REG_FO(signbit) REG_FO(isposinf) REG_FO(isneginf) REG_FO(special_i0e) REG_FO(special_i1)
              REG_FO(special_i1e) REG_FO(special_ndtri) REG_FO(special_log_ndtr)
                  REG_FO(special_erfcx) REG_FO(special_entr) REG_FO(special_bessel_j0)
                      REG_FO(special_bessel_j1) REG_FO(special_bessel_y0) REG_FO(special_bessel_y1)
                          REG_FO(special_modified_bessel_i0) REG_FO(special_modified_bessel_i1)
                              REG_FO(special_modified_bessel_k0) REG_FO(special_modified_bessel_k1)
                                  REG_FO(special_scaled_modified_bessel_k0)
                                      REG_FO(special_scaled_modified_bessel_k1)
                                          REG_FO(special_spherical_bessel_j0)
#undef REG
#undef REG_FO
      // sgn is sign for real dtypes; logical_not itself is in kernels_elementwise.cpp.
      impl(m, "sgn", LZ_FN(sign_f));
  impl(m, "sgn_", LZ_FN(sign_i));
  impl(m, "sgn.out", LZ_FN(sign_o));
  impl(m, "logical_not_", LZ_FN(logical_not_i));
  impl(m, "logical_not.out", LZ_FN(logical_not_o));
  impl(m, "round.decimals", LZ_FN(round_d));
  impl(m, "round_.decimals", LZ_FN(round_d_i));
  impl(m, "round.decimals_out", LZ_FN(round_d_o));
  impl(m, "polygamma", LZ_FN(polygamma_f));
  impl(m, "polygamma_", LZ_FN(polygamma_i));
  impl(m, "polygamma.out", LZ_FN(polygamma_o));
  impl(m, "nan_to_num", LZ_FN(nan_to_num_f));
  impl(m, "nan_to_num_", LZ_FN(nan_to_num_i));
  impl(m, "nan_to_num.out", LZ_FN(nan_to_num_o));
}

}  // namespace

}  // namespace lazyx_bridge
