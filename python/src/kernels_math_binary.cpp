// Kernels: binary math ops (atan2, hypot, copysign, fmod, remainder, the division rounding
// modes, bitwise and logical xor, nextafter, logaddexp, xlogy, heaviside, lerp with a tensor
// weight, clamp with tensor bounds, pow with a scalar base) and the comparisons' in-place and
// out= variants. A 0-dim CPU operand (a Python number) is a scalar in promotion.
#include <torch/library.h>

#include "kernels_math.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;

namespace {

// A comparison's left operand as a tensor (a Python number is a 0-dim tensor of its kind).
LT lhs(const LT& x) { return x; }
LT lhs(const lazyx::Scalar& s) { return lazyx::scalar_tensor(s); }

// Tensor-Tensor: functional, in place, out=; and the Scalar-other forms.
#define BIN_T(NAME, EXPR)                                                             \
  const auto NAME##_fn = [](const auto& x, const auto& y) { return EXPR; };           \
  [[maybe_unused]] Tensor NAME##_t(const Tensor& a, const Tensor& b) {                \
    return wrap(apply2(NAME##_fn, a, b));                                             \
  }                                                                                   \
  [[maybe_unused]] Tensor& NAME##_ti(Tensor& a, const Tensor& b) {                    \
    return math_inplace(a, apply2(NAME##_fn, a, b));                                  \
  }                                                                                   \
  [[maybe_unused]] Tensor& NAME##_to(const Tensor& a, const Tensor& b, Tensor& out) { \
    return math_out(out, apply2(NAME##_fn, a, b));                                    \
  }
#define BIN_S(NAME)                                                                         \
  [[maybe_unused]] Tensor NAME##_s(const Tensor& a, const c10::Scalar& b) {                 \
    return wrap(NAME##_fn(lz(a), to_lz(b)));                                                \
  }                                                                                         \
  [[maybe_unused]] Tensor& NAME##_si(Tensor& a, const c10::Scalar& b) {                     \
    return math_inplace(a, NAME##_fn(lz(a), to_lz(b)));                                     \
  }                                                                                         \
  [[maybe_unused]] Tensor& NAME##_so(const Tensor& a, const c10::Scalar& b, Tensor& out) {  \
    return math_out(out, NAME##_fn(lz(a), to_lz(b)));                                       \
  }                                                                                         \
  [[maybe_unused]] Tensor NAME##_st(const c10::Scalar& a, const Tensor& b) {                \
    return wrap(NAME##_fn(to_lz(a), lz(b)));                                                \
  }                                                                                         \
  [[maybe_unused]] Tensor& NAME##_sto(const c10::Scalar& a, const Tensor& b, Tensor& out) { \
    return math_out(out, NAME##_fn(to_lz(a), lz(b)));                                       \
  }
BIN_T(atan2, lazyx::atan2(x, y))
BIN_T(hypot, lazyx::hypot(x, y))
BIN_T(nextafter, lazyx::nextafter(x, y))
BIN_T(logaddexp, lazyx::logaddexp(x, y))
BIN_T(logaddexp2, lazyx::logaddexp2(x, y))
BIN_T(heaviside, lazyx::heaviside(x, y))
BIN_T(logical_xor, lazyx::logical_xor(x, y))
BIN_T(copysign, lazyx::copysign(x, y))
BIN_S(copysign)
BIN_T(fmod, lazyx::fmod(x, y))
BIN_S(fmod)
BIN_T(remainder, lazyx::remainder(x, y))
BIN_S(remainder)
BIN_T(floor_divide, lazyx::floor_divide(x, y))
BIN_S(floor_divide)
BIN_T(bitwise_and, lazyx::bitwise_and(x, y))
BIN_S(bitwise_and)
BIN_T(bitwise_or, lazyx::bitwise_or(x, y))
BIN_S(bitwise_or)
BIN_T(bitwise_xor, lazyx::bitwise_xor(x, y))
BIN_S(bitwise_xor)
BIN_T(xlogy, lazyx::xlogy(x, y))
BIN_S(xlogy)
BIN_T(xlog1py, lazyx::xlog1py(x, y))
BIN_S(xlog1py)
BIN_T(eq, lhs(x).eq(y))
BIN_S(eq)
BIN_T(ne, lhs(x).ne(y))
BIN_S(ne)
BIN_T(lt, lhs(x).lt(y))
BIN_S(lt)
BIN_T(le, lhs(x).le(y))
BIN_S(le)
BIN_T(gt, lhs(x).gt(y))
BIN_S(gt)
BIN_T(ge, lhs(x).ge(y))
BIN_S(ge)
#undef BIN_T
#undef BIN_S

// div with rounding_mode: None is true division, "trunc" and "floor" round the quotient.
template <class B>
LT div_round(const LT& a, const B& b, optional<c10::string_view> mode) {
  if (!mode.has_value()) return a.div(b);
  if (*mode == "trunc") return lazyx::trunc_divide(a, b);
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or ",
              "'floor' but found '", *mode, "'");
  return lazyx::floor_divide(a, b);
}
LT div_mode2(const Tensor& a, const Tensor& b, optional<c10::string_view> mode) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return div_round(lz(a), cpu_scalar(b), mode);
  return div_round(lz(a), lz(b), mode);
}
Tensor div_tm(const Tensor& a, const Tensor& b, optional<c10::string_view> mode) {
  return wrap(div_mode2(a, b, mode));
}
Tensor& div_tmi(Tensor& a, const Tensor& b, optional<c10::string_view> mode) {
  return math_inplace(a, div_mode2(a, b, mode));
}
Tensor& div_tmo(const Tensor& a, const Tensor& b, optional<c10::string_view> mode, Tensor& out) {
  return math_out(out, div_mode2(a, b, mode));
}
Tensor div_sm(const Tensor& a, const c10::Scalar& b, optional<c10::string_view> mode) {
  return wrap(div_round(lz(a), to_lz(b), mode));
}
Tensor& div_smi(Tensor& a, const c10::Scalar& b, optional<c10::string_view> mode) {
  return math_inplace(a, div_round(lz(a), to_lz(b), mode));
}

// pow with a scalar base, in place with a tensor exponent, and out=.
Tensor pow_st(const c10::Scalar& a, const Tensor& e) {
  LT x = lz(e);
  lazyx::Scalar s = to_lz(a);
  lazyx::Dtype d = to_lz(at::result_type(e, a));
  return wrap(lazyx::full({}, s, d).pow(x));
}
Tensor& pow_tti(Tensor& a, const Tensor& e) {
  LT x = lz(a);
  return math_inplace(a, is_cpu_scalar(e) ? x.pow(cpu_scalar(e)) : x.pow(lz(e)));
}
Tensor& pow_tto(const Tensor& a, const Tensor& e, Tensor& out) {
  LT x = lz(a);
  return math_out(out, is_cpu_scalar(e) ? x.pow(cpu_scalar(e)) : x.pow(lz(e)));
}
Tensor& pow_tso(const Tensor& a, const c10::Scalar& e, Tensor& out) {
  TORCH_CHECK(!(c10::isIntegralType(a.scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  return math_out(out, pow_scalar(lz(a), e));
}
Tensor& pow_sto(const c10::Scalar& a, const Tensor& e, Tensor& out) {
  return math_out(out, lz(pow_st(a, e)));
}

// lerp with a tensor weight.
LT lerp_lz(const Tensor& s, const Tensor& e, const Tensor& w) {
  LT ww = is_cpu_scalar(w) ? lazyx::full({}, cpu_scalar(w), lz(s).dtype()) : lz(w);
  return lazyx::lerp(lz(s), lz(e), ww);
}
Tensor lerp_t(const Tensor& s, const Tensor& e, const Tensor& w) { return wrap(lerp_lz(s, e, w)); }
Tensor& lerp_ti(Tensor& s, const Tensor& e, const Tensor& w) {
  return math_inplace(s, lerp_lz(s, e, w));
}
Tensor& lerp_to(const Tensor& s, const Tensor& e, const Tensor& w, Tensor& out) {
  return math_out(out, lerp_lz(s, e, w));
}
Tensor& lerp_so(const Tensor& s, const Tensor& e, const c10::Scalar& w, Tensor& out) {
  return math_out(out, lazyx::lerp(lz(s), lz(e), to_lz(w)));
}

// clamp with tensor bounds (either may be absent).
LT bound(const optional<Tensor>& t) {
  if (!t.has_value() || !t->defined()) return LT();
  return lz(*t);
}
LT clamp_lz(const Tensor& a, const optional<Tensor>& lo, const optional<Tensor>& hi) {
  TORCH_CHECK(bound(lo).defined() || bound(hi).defined(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  return lazyx::clamp(lz(a), bound(lo), bound(hi));
}
Tensor clamp_t(const Tensor& a, const optional<Tensor>& lo, const optional<Tensor>& hi) {
  return wrap(clamp_lz(a, lo, hi));
}
Tensor& clamp_ti(Tensor& a, const optional<Tensor>& lo, const optional<Tensor>& hi) {
  return math_inplace(a, clamp_lz(a, lo, hi));
}
Tensor& clamp_to(const Tensor& a, const optional<Tensor>& lo, const optional<Tensor>& hi,
                 Tensor& out) {
  return math_out(out, clamp_lz(a, lo, hi));
}
std::optional<lazyx::Scalar> opt_s(const optional<c10::Scalar>& s) {
  if (!s.has_value()) return std::nullopt;
  return to_lz(*s);
}
Tensor& clamp_so(const Tensor& a, const optional<c10::Scalar>& lo, const optional<c10::Scalar>& hi,
                 Tensor& out) {
  return math_out(out, lz(a).clamp(opt_s(lo), opt_s(hi)));
}
Tensor clamp_min_t(const Tensor& a, const Tensor& lo) { return clamp_t(a, lo, c10::nullopt); }
Tensor clamp_max_t(const Tensor& a, const Tensor& hi) { return clamp_t(a, c10::nullopt, hi); }
Tensor& clamp_min_ti(Tensor& a, const Tensor& lo) { return clamp_ti(a, lo, c10::nullopt); }
Tensor& clamp_max_ti(Tensor& a, const Tensor& hi) { return clamp_ti(a, c10::nullopt, hi); }
Tensor& clamp_max_si(Tensor& a, const c10::Scalar& hi) {
  return math_inplace(a, lz(a).clamp(std::nullopt, to_lz(hi)));
}
Tensor& clamp_min_so(const Tensor& a, const c10::Scalar& lo, Tensor& out) {
  return math_out(out, lz(a).clamp(to_lz(lo), std::nullopt));
}
Tensor& clamp_max_so(const Tensor& a, const c10::Scalar& hi, Tensor& out) {
  return math_out(out, lz(a).clamp(std::nullopt, to_lz(hi)));
}
Tensor& clamp_min_to(const Tensor& a, const Tensor& lo, Tensor& out) {
  return clamp_to(a, lo, c10::nullopt, out);
}
Tensor& clamp_max_to(const Tensor& a, const Tensor& hi, Tensor& out) {
  return clamp_to(a, c10::nullopt, hi, out);
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
#define REG_T(NAME, T, TI, TO)            \
  impl(m, #NAME T, LZ_FN(NAME##_t));       \
  impl(m, #NAME "_" TI, LZ_FN(NAME##_ti)); \
  impl(m, #NAME "." TO, LZ_FN(NAME##_to));
  REG_T(atan2, "", "", "out")
  REG_T(hypot, "", "", "out")
  REG_T(nextafter, "", "", "out")
  REG_T(heaviside, "", "", "out")
  REG_T(logical_xor, "", "", "out")
  REG_T(copysign, ".Tensor", ".Tensor", "out")
  REG_T(fmod, ".Tensor", ".Tensor", "Tensor_out")
  REG_T(remainder, ".Tensor", ".Tensor", "Tensor_out")
  REG_T(floor_divide, "", ".Tensor", "out")
  REG_T(bitwise_and, ".Tensor", ".Tensor", "Tensor_out")
  REG_T(bitwise_or, ".Tensor", ".Tensor", "Tensor_out")
  REG_T(bitwise_xor, ".Tensor", ".Tensor", "Tensor_out")
  REG_T(xlogy, ".Tensor", ".Tensor", "OutTensor")
  // The comparisons' functional forms are in kernels_elementwise.cpp.
  impl(m, "eq_.Tensor", LZ_FN(eq_ti));
  impl(m, "ne_.Tensor", LZ_FN(ne_ti));
  impl(m, "lt_.Tensor", LZ_FN(lt_ti));
  impl(m, "le_.Tensor", LZ_FN(le_ti));
  impl(m, "gt_.Tensor", LZ_FN(gt_ti));
  impl(m, "ge_.Tensor", LZ_FN(ge_ti));
  impl(m, "eq.Tensor_out", LZ_FN(eq_to));
  impl(m, "ne.Tensor_out", LZ_FN(ne_to));
  impl(m, "lt.Tensor_out", LZ_FN(lt_to));
  impl(m, "le.Tensor_out", LZ_FN(le_to));
  impl(m, "gt.Tensor_out", LZ_FN(gt_to));
  impl(m, "ge.Tensor_out", LZ_FN(ge_to));
#undef REG_T
#define REG_S(NAME, S, SI, SO)            \
  impl(m, #NAME S, LZ_FN(NAME##_s));       \
  impl(m, #NAME "_" SI, LZ_FN(NAME##_si)); \
  impl(m, #NAME "." SO, LZ_FN(NAME##_so));
  REG_S(copysign, ".Scalar", ".Scalar", "Scalar_out")
  REG_S(fmod, ".Scalar", ".Scalar", "Scalar_out")
  REG_S(remainder, ".Scalar", ".Scalar", "Scalar_out")
  REG_S(xlogy, ".Scalar_Other", ".Scalar_Other", "OutScalar_Other")
#undef REG_S
  // bitwise_*.Scalar, bitwise_*_.Scalar and floor_divide(_).Scalar are composite in eager: they
  // reach the Tensor overloads (a backend kernel would hide their autograd kernel).
  impl(m, "remainder.Scalar_Tensor", LZ_FN(remainder_st));
  impl(m, "remainder.Scalar_Tensor_out", LZ_FN(remainder_sto));
  impl(m, "bitwise_and.Scalar_out", LZ_FN(bitwise_and_so));
  impl(m, "bitwise_or.Scalar_out", LZ_FN(bitwise_or_so));
  impl(m, "bitwise_xor.Scalar_out", LZ_FN(bitwise_xor_so));
  impl(m, "bitwise_and.Scalar_Tensor", LZ_FN(bitwise_and_st));
  impl(m, "bitwise_or.Scalar_Tensor", LZ_FN(bitwise_or_st));
  impl(m, "bitwise_xor.Scalar_Tensor", LZ_FN(bitwise_xor_st));
  impl(m, "bitwise_and.Scalar_Tensor_out", LZ_FN(bitwise_and_sto));
  impl(m, "bitwise_or.Scalar_Tensor_out", LZ_FN(bitwise_or_sto));
  impl(m, "bitwise_xor.Scalar_Tensor_out", LZ_FN(bitwise_xor_sto));
  impl(m, "xlogy.Scalar_Self", LZ_FN(xlogy_st));
  impl(m, "xlogy.OutScalar_Self", LZ_FN(xlogy_sto));
  impl(m, "special_xlog1py", LZ_FN(xlog1py_t));
  impl(m, "special_xlog1py.out", LZ_FN(xlog1py_to));
  impl(m, "special_xlog1py.other_scalar", LZ_FN(xlog1py_s));
  impl(m, "special_xlog1py.other_scalar_out", LZ_FN(xlog1py_so));
  impl(m, "special_xlog1py.self_scalar", LZ_FN(xlog1py_st));
  impl(m, "special_xlog1py.self_scalar_out", LZ_FN(xlog1py_sto));
  impl(m, "logaddexp", LZ_FN(logaddexp_t));
  impl(m, "logaddexp.out", LZ_FN(logaddexp_to));
  impl(m, "logaddexp2", LZ_FN(logaddexp2_t));
  impl(m, "logaddexp2.out", LZ_FN(logaddexp2_to));
#define REG_CMP(NAME)                         \
  impl(m, #NAME "_.Scalar", LZ_FN(NAME##_si)); \
  impl(m, #NAME ".Scalar_out", LZ_FN(NAME##_so));
  REG_CMP(eq)
  REG_CMP(ne)
  REG_CMP(lt) REG_CMP(le) REG_CMP(gt) REG_CMP(ge)
#undef REG_CMP
      impl(m, "div.Tensor_mode", LZ_FN(div_tm));
  impl(m, "div_.Tensor_mode", LZ_FN(div_tmi));
  impl(m, "div.out_mode", LZ_FN(div_tmo));
  impl(m, "div.Scalar_mode", LZ_FN(div_sm));
  impl(m, "div_.Scalar_mode", LZ_FN(div_smi));
  impl(m, "pow.Scalar", LZ_FN(pow_st));
  impl(m, "pow_.Tensor", LZ_FN(pow_tti));
  impl(m, "pow.Tensor_Tensor_out", LZ_FN(pow_tto));
  impl(m, "pow.Tensor_Scalar_out", LZ_FN(pow_tso));
  impl(m, "pow.Scalar_out", LZ_FN(pow_sto));
  impl(m, "lerp.Tensor", LZ_FN(lerp_t));
  impl(m, "lerp_.Tensor", LZ_FN(lerp_ti));
  impl(m, "lerp.Tensor_out", LZ_FN(lerp_to));
  impl(m, "lerp.Scalar_out", LZ_FN(lerp_so));
  impl(m, "clamp.Tensor", LZ_FN(clamp_t));
  impl(m, "clamp_.Tensor", LZ_FN(clamp_ti));
  impl(m, "clamp.Tensor_out", LZ_FN(clamp_to));
  impl(m, "clamp.out", LZ_FN(clamp_so));
  impl(m, "clamp_min.Tensor", LZ_FN(clamp_min_t));
  impl(m, "clamp_max.Tensor", LZ_FN(clamp_max_t));
  impl(m, "clamp_min_.Tensor", LZ_FN(clamp_min_ti));
  impl(m, "clamp_max_.Tensor", LZ_FN(clamp_max_ti));
  impl(m, "clamp_max_", LZ_FN(clamp_max_si));
  impl(m, "clamp_min.out", LZ_FN(clamp_min_so));
  impl(m, "clamp_max.out", LZ_FN(clamp_max_so));
  impl(m, "clamp_min.Tensor_out", LZ_FN(clamp_min_to));
  impl(m, "clamp_max.Tensor_out", LZ_FN(clamp_max_to));
}

}  // namespace

}  // namespace lazyx_bridge
