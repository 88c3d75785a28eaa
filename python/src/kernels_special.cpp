// Kernels: the special functions of two arguments (the orthogonal polynomials of torch.special,
// zeta, igamma and igammac) and airy_ai, functional, out= and (igamma, igammac) in place. The
// Scalar overloads (x_scalar, n_scalar, self_scalar, other_scalar) are composites that reach
// these kernels with a wrapped number, which stays a scalar in type promotion.
#include <torch/library.h>

#include "kernels_math.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

#define SPECIAL2(NAME, FN)                                                                    \
  const auto NAME##_fn = [](const auto& x, const auto& y) { return FN(x, y); };               \
  Tensor NAME##_t(const Tensor& a, const Tensor& b) { return wrap(apply2(NAME##_fn, a, b)); } \
  Tensor& NAME##_to(const Tensor& a, const Tensor& b, Tensor& out) {                          \
    return math_out(out, apply2(NAME##_fn, a, b));                                            \
  }
SPECIAL2(cheb_t, lazyx::chebyshev_polynomial_t)
SPECIAL2(cheb_u, lazyx::chebyshev_polynomial_u)
SPECIAL2(cheb_v, lazyx::chebyshev_polynomial_v)
SPECIAL2(cheb_w, lazyx::chebyshev_polynomial_w)
SPECIAL2(shifted_t, lazyx::shifted_chebyshev_polynomial_t)
SPECIAL2(shifted_u, lazyx::shifted_chebyshev_polynomial_u)
SPECIAL2(shifted_v, lazyx::shifted_chebyshev_polynomial_v)
SPECIAL2(shifted_w, lazyx::shifted_chebyshev_polynomial_w)
SPECIAL2(hermite_h, lazyx::hermite_polynomial_h)
SPECIAL2(hermite_he, lazyx::hermite_polynomial_he)
SPECIAL2(laguerre_l, lazyx::laguerre_polynomial_l)
SPECIAL2(legendre_p, lazyx::legendre_polynomial_p)
SPECIAL2(zeta, lazyx::zeta)
SPECIAL2(igamma, lazyx::igamma)
SPECIAL2(igammac, lazyx::igammac)
#undef SPECIAL2

Tensor& igamma_ti(Tensor& a, const Tensor& b) { return math_inplace(a, apply2(igamma_fn, a, b)); }
Tensor& igammac_ti(Tensor& a, const Tensor& b) { return math_inplace(a, apply2(igammac_fn, a, b)); }
Tensor airy_ai_f(const Tensor& a) { return wrap(lazyx::airy_ai(lz(a))); }
Tensor& airy_ai_o(const Tensor& a, Tensor& out) { return math_out(out, lazyx::airy_ai(lz(a))); }

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
#define REG2(OP, NAME)         \
  impl(m, OP, LZ_FN(NAME##_t)); \
  impl(m, OP ".out", LZ_FN(NAME##_to));
  REG2("special_chebyshev_polynomial_t", cheb_t)
  REG2("special_chebyshev_polynomial_u", cheb_u)
  REG2("special_chebyshev_polynomial_v", cheb_v)
  REG2("special_chebyshev_polynomial_w", cheb_w)
  REG2("special_shifted_chebyshev_polynomial_t", shifted_t)
  REG2("special_shifted_chebyshev_polynomial_u", shifted_u)
  REG2("special_shifted_chebyshev_polynomial_v", shifted_v)
  REG2("special_shifted_chebyshev_polynomial_w", shifted_w)
  REG2("special_hermite_polynomial_h", hermite_h)
  REG2("special_hermite_polynomial_he", hermite_he)
  REG2("special_laguerre_polynomial_l", laguerre_l)
  REG2("special_legendre_polynomial_p", legendre_p)
  REG2("special_zeta", zeta)
  REG2("igamma", igamma)
  REG2("igammac", igammac)
#undef REG2
  impl(m, "igamma_", LZ_FN(igamma_ti));
  impl(m, "igammac_", LZ_FN(igammac_ti));
  impl(m, "special_airy_ai", LZ_FN(airy_ai_f));
  impl(m, "special_airy_ai.out", LZ_FN(airy_ai_o));
}

}  // namespace

}  // namespace lazyx_bridge
