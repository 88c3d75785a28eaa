// Scalar special functions in double, shared by the reference kernels and the cpu backend.
#pragma once

#include <cstdint>

#include "ir/math_ops.h"

namespace lazyx::special {

double erfinv(double y);
double erfcx(double x);
double ndtri(double p);
double log_ndtr(double x);
double digamma(double x);
// `single`: the result is float32 or narrower (matters only at the poles of n = 1).
double polygamma(int64_t n, double x, bool single = false);
// Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1 (q may be negative, between poles, for
// integer s); zeta adds PyTorch's special values (NaN for s < 1, inf at s = 1 and the poles).
double hurwitz_zeta(double s, double q);
double zeta(double x, double q);
double airy_ai(double x);
// SpecialFn's function `id`; `order` is polygamma's n.
double eval(ir::Special id, int64_t order, double x, bool single);
// SpecialFn2's function `id` of (x, y) (special_functions2.cpp).
double eval2(ir::Special2 id, double x, double y);

}  // namespace lazyx::special
