// What the math and activation kernels share.
#pragma once

#include "kernels.h"
#include "lazyx/math.h"

namespace lazyx_bridge {

// r becomes self's value (the result type must cast to self's dtype, the shape must match).
at::Tensor& math_inplace(at::Tensor& self, const lazyx::Tensor& r);
// out= with PyTorch's rule: the result is cast to out's dtype where that is allowed.
at::Tensor& math_out(at::Tensor& out, const lazyx::Tensor& r);

// f(a, b) with a CPU-scalar operand passed as a lazyx::Scalar.
template <class F>
LT apply2(F f, const at::Tensor& a, const at::Tensor& b) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return f(lz(a), cpu_scalar(b));
  if (is_cpu_scalar(a) && is_lazyx(b)) return f(cpu_scalar(a), lz(b));
  return f(lz(a), lz(b));
}

}  // namespace lazyx_bridge
