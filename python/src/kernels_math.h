// What the math and activation kernels share.
#pragma once

#include "kernels.h"
#include "lazyx/math.h"

namespace lazyx_bridge {

// r becomes self's value (the result type must cast to self's dtype, the shape must match).
at::Tensor& math_inplace(at::Tensor& self, const lazyx::Tensor& r);
// out= with PyTorch's rule: the result is cast to out's dtype where that is allowed.
at::Tensor& math_out(at::Tensor& out, const lazyx::Tensor& r);

}  // namespace lazyx_bridge
