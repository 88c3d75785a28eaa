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
// SpecialFn's function `id`; `order` is polygamma's n.
double eval(ir::Special id, int64_t order, double x, bool single);

}  // namespace lazyx::special
