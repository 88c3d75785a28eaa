// Elementwise math beyond the basics, as free functions with PyTorch's type promotion: float
// functions turn integer and bool inputs into float32; floor/ceil/round/trunc keep integers as
// they are; bitwise ops take integral and bool tensors only.
#pragma once

#include <optional>
#include <utility>

#include "lazyx/tensor.h"

namespace lazyx {

// Rounding (round: half to even) and sign.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);  // x - trunc(x)
Tensor sign(const Tensor& x);
Tensor signbit(const Tensor& x);  // bool; true for -0.0
// Exponentials, logarithms, error functions, trigonometric and hyperbolic functions.
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor sinc(const Tensor& x);  // sin(pi x) / (pi x), 1 at 0
// Tests.
Tensor isinf(const Tensor& x);
Tensor isposinf(const Tensor& x);
Tensor isneginf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

// Binary ops; a Scalar operand takes part in promotion as a Python number does.
#define LAZYX_MATH_BINARY(fn)                  \
  Tensor fn(const Tensor& a, const Tensor& b); \
  Tensor fn(const Tensor& a, Scalar b);        \
  Tensor fn(Scalar a, const Tensor& b);
LAZYX_MATH_BINARY(atan2)
LAZYX_MATH_BINARY(hypot)
LAZYX_MATH_BINARY(copysign)
LAZYX_MATH_BINARY(fmod)          // sign of the dividend
LAZYX_MATH_BINARY(remainder)     // sign of the divisor (Python's %)
LAZYX_MATH_BINARY(floor_divide)  // Python's //
LAZYX_MATH_BINARY(trunc_divide)  // div(rounding_mode="trunc")
LAZYX_MATH_BINARY(bitwise_and)
LAZYX_MATH_BINARY(bitwise_or)
LAZYX_MATH_BINARY(bitwise_xor)
LAZYX_MATH_BINARY(logical_xor)
LAZYX_MATH_BINARY(nextafter)
LAZYX_MATH_BINARY(logaddexp)
LAZYX_MATH_BINARY(logaddexp2)
LAZYX_MATH_BINARY(xlogy)    // x * log(y), 0 where x == 0 (unless y is NaN)
LAZYX_MATH_BINARY(xlog1py)  // x * log1p(y), likewise
LAZYX_MATH_BINARY(heaviside)
#undef LAZYX_MATH_BINARY
Tensor bitwise_not(const Tensor& x);
// a + w * (b - a), and a - (a - b) * (1 - w) for |w| >= 0.5 (exact at w = 1).
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w);
Tensor lerp(const Tensor& a, const Tensor& b, Scalar w);
// clamp with tensor bounds (either may be undefined).
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);

// Special functions (computed in double per element; the cpu backend does not fuse them).
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
Tensor polygamma(int64_t n, const Tensor& x);
Tensor i0(const Tensor& x);
Tensor i0e(const Tensor& x);
Tensor i1(const Tensor& x);
Tensor i1e(const Tensor& x);
Tensor ndtri(const Tensor& x);
Tensor log_ndtr(const Tensor& x);
Tensor erfcx(const Tensor& x);
Tensor entr(const Tensor& x);  // -x log x, 0 at 0, -inf for x < 0
Tensor ndtr(const Tensor& x);
Tensor bessel_j0(const Tensor& x);
Tensor bessel_j1(const Tensor& x);
Tensor bessel_y0(const Tensor& x);
Tensor bessel_y1(const Tensor& x);
Tensor modified_bessel_i0(const Tensor& x);
Tensor modified_bessel_i1(const Tensor& x);
Tensor modified_bessel_k0(const Tensor& x);
Tensor modified_bessel_k1(const Tensor& x);
Tensor scaled_modified_bessel_k0(const Tensor& x);
Tensor scaled_modified_bessel_k1(const Tensor& x);
// x = mantissa * 2^exponent with |mantissa| in [0.5, 1) (0, inf and NaN: x and exponent 0);
// mantissa in x's dtype, exponent int32. Floating dtypes only.
std::pair<Tensor, Tensor> frexp(const Tensor& x);
Tensor spherical_bessel_j0(const Tensor& x);
Tensor airy_ai(const Tensor& x);
// Orthogonal polynomials p_n(x) of degree n, which is truncated to an integer (a negative, NaN
// or out-of-range n gives 0); the shifted Chebyshev kinds are the plain ones at 2x - 1.
#define LAZYX_MATH_SPECIAL2(fn)                \
  Tensor fn(const Tensor& a, const Tensor& b); \
  Tensor fn(const Tensor& a, Scalar b);        \
  Tensor fn(Scalar a, const Tensor& b);
LAZYX_MATH_SPECIAL2(chebyshev_polynomial_t)  // (x, n)
LAZYX_MATH_SPECIAL2(chebyshev_polynomial_u)
LAZYX_MATH_SPECIAL2(chebyshev_polynomial_v)
LAZYX_MATH_SPECIAL2(chebyshev_polynomial_w)
LAZYX_MATH_SPECIAL2(shifted_chebyshev_polynomial_t)
LAZYX_MATH_SPECIAL2(shifted_chebyshev_polynomial_u)
LAZYX_MATH_SPECIAL2(shifted_chebyshev_polynomial_v)
LAZYX_MATH_SPECIAL2(shifted_chebyshev_polynomial_w)
LAZYX_MATH_SPECIAL2(hermite_polynomial_h)   // physicists'
LAZYX_MATH_SPECIAL2(hermite_polynomial_he)  // probabilists'
LAZYX_MATH_SPECIAL2(laguerre_polynomial_l)
LAZYX_MATH_SPECIAL2(legendre_polynomial_p)
// Hurwitz zeta(x, q) and the regularized incomplete gamma functions P(a, x), Q(a, x).
LAZYX_MATH_SPECIAL2(zeta)
LAZYX_MATH_SPECIAL2(igamma)
LAZYX_MATH_SPECIAL2(igammac)
#undef LAZYX_MATH_SPECIAL2

}  // namespace lazyx
