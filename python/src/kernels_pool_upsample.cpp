// Kernels: upsample_* (nearest, nearest-exact, linear, bilinear, bicubic, trilinear) and their
// backward ops (lazyx::interpolate).
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::InterpMode;
using Scales = std::vector<std::optional<double>>;

namespace {

std::optional<double> sc(optional<double> s) {
  return s.has_value() ? std::optional<double>(*s) : std::nullopt;
}

Tensor up(const Tensor& self, c10::SymIntArrayRef out, InterpMode m, bool align, Scales s) {
  return wrap(lazyx::interpolate(lz(self), to_shape(out), m, align, s));
}
Tensor up_back(const Tensor& grad, c10::SymIntArrayRef in, InterpMode m, bool align, Scales s) {
  return wrap(lazyx::interpolate_backward(lz(grad), to_shape(in), m, align, s));
}

template <InterpMode M>
Tensor up1(const Tensor& self, c10::SymIntArrayRef out, optional<double> s) {
  return up(self, out, M, false, {sc(s)});
}
template <InterpMode M>
Tensor up2(const Tensor& self, c10::SymIntArrayRef out, optional<double> h, optional<double> w) {
  return up(self, out, M, false, {sc(h), sc(w)});
}
template <InterpMode M>
Tensor up3(const Tensor& self, c10::SymIntArrayRef out, optional<double> d, optional<double> h,
           optional<double> w) {
  return up(self, out, M, false, {sc(d), sc(h), sc(w)});
}
template <InterpMode M>
Tensor up1_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, optional<double> s) {
  return up_back(g, in, M, false, {sc(s)});
}
template <InterpMode M>
Tensor up2_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, optional<double> h,
                optional<double> w) {
  return up_back(g, in, M, false, {sc(h), sc(w)});
}
template <InterpMode M>
Tensor up3_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, optional<double> d,
                optional<double> h, optional<double> w) {
  return up_back(g, in, M, false, {sc(d), sc(h), sc(w)});
}

Tensor linear1d(const Tensor& self, c10::SymIntArrayRef out, bool align, optional<double> s) {
  return up(self, out, InterpMode::Linear, align, {sc(s)});
}
Tensor linear1d_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, bool align,
                     optional<double> s) {
  return up_back(g, in, InterpMode::Linear, align, {sc(s)});
}
template <InterpMode M>
Tensor interp2d(const Tensor& self, c10::SymIntArrayRef out, bool align, optional<double> h,
                optional<double> w) {
  if (!self.is_floating_point()) {
    // Eager resamples uint8 images with its own integer rounding: run its kernel on CPU.
    const bool cubic = M == InterpMode::Cubic;
    lazyx::metrics::add_counter(cubic ? "aten::upsample_bicubic2d" : "aten::upsample_bilinear2d");
    return to_device(cubic ? at::upsample_bicubic2d_symint(to_cpu(self), out, align, h, w)
                           : at::upsample_bilinear2d_symint(to_cpu(self), out, align, h, w));
  }
  return up(self, out, M, align, {sc(h), sc(w)});
}
template <InterpMode M>
Tensor interp2d_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, bool align,
                     optional<double> h, optional<double> w) {
  return up_back(g, in, M, align, {sc(h), sc(w)});
}
Tensor trilinear(const Tensor& self, c10::SymIntArrayRef out, bool align, optional<double> d,
                 optional<double> h, optional<double> w) {
  return up(self, out, InterpMode::Linear, align, {sc(d), sc(h), sc(w)});
}
Tensor trilinear_back(const Tensor& g, c10::SymIntArrayRef, c10::SymIntArrayRef in, bool align,
                      optional<double> d, optional<double> h, optional<double> w) {
  return up_back(g, in, InterpMode::Linear, align, {sc(d), sc(h), sc(w)});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  constexpr InterpMode N = InterpMode::Nearest, E = InterpMode::NearestExact;
  impl(m, "upsample_nearest1d", LZ_FN(up1<N>));
  impl(m, "upsample_nearest2d", LZ_FN(up2<N>));
  impl(m, "upsample_nearest3d", LZ_FN(up3<N>));
  impl(m, "upsample_nearest1d_backward", LZ_FN(up1_back<N>));
  impl(m, "upsample_nearest2d_backward", LZ_FN(up2_back<N>));
  impl(m, "upsample_nearest3d_backward", LZ_FN(up3_back<N>));
  impl(m, "_upsample_nearest_exact1d", LZ_FN(up1<E>));
  impl(m, "_upsample_nearest_exact2d", LZ_FN(up2<E>));
  impl(m, "_upsample_nearest_exact3d", LZ_FN(up3<E>));
  impl(m, "_upsample_nearest_exact1d_backward", LZ_FN(up1_back<E>));
  impl(m, "_upsample_nearest_exact2d_backward", LZ_FN(up2_back<E>));
  impl(m, "_upsample_nearest_exact3d_backward", LZ_FN(up3_back<E>));
  impl(m, "upsample_linear1d", LZ_FN(linear1d));
  impl(m, "upsample_linear1d_backward", LZ_FN(linear1d_back));
  impl(m, "upsample_bilinear2d", LZ_FN(interp2d<InterpMode::Linear>));
  impl(m, "upsample_bilinear2d_backward", LZ_FN(interp2d_back<InterpMode::Linear>));
  impl(m, "upsample_bicubic2d", LZ_FN(interp2d<InterpMode::Cubic>));
  impl(m, "upsample_bicubic2d_backward", LZ_FN(interp2d_back<InterpMode::Cubic>));
  impl(m, "upsample_trilinear3d", LZ_FN(trilinear));
  impl(m, "upsample_trilinear3d_backward", LZ_FN(trilinear_back));
}

}  // namespace lazyx_bridge
