// Kernels: convolutions. torch sends every convolution on a Lazy device (conv1d/2d/3d,
// the transposed ones, nn.ConvNd) to the two "overrideable" ops; both run as lazyx graph ops.
#include <torch/library.h>

#include <array>
#include <tuple>

#include "kernels.h"
#include "lazyx/conv.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

lazyx::ConvOptions options(c10::IntArrayRef stride, c10::IntArrayRef padding,
                           c10::IntArrayRef dilation, bool transposed,
                           c10::IntArrayRef output_padding, int64_t groups) {
  lazyx::ConvOptions o;
  o.stride = to_dims(stride);
  o.padding = to_dims(padding);
  o.dilation = to_dims(dilation);
  o.output_padding = to_dims(output_padding);
  o.groups = groups;
  o.transposed = transposed;
  return o;
}

Tensor convolution_overrideable(const Tensor& input, const Tensor& weight,
                                const c10::optional<Tensor>& bias, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  std::optional<LT> b;
  if (bias.has_value() && bias->defined()) b = lz(*bias);
  return wrap(
      lazyx::convolution(lz(input), lz(weight), b,
                         options(stride, padding, dilation, transposed, output_padding, groups)));
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_overrideable(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const lazyx::ConvOptions o =
      options(stride, padding, dilation, transposed, output_padding, groups);
  const LT g = lz(grad_output);
  Tensor gi, gw, gb;
  if (output_mask[0]) {
    gi = wrap(lazyx::convolution_backward_input(g, lz(weight), to_shape(input.sizes()), o));
  }
  if (output_mask[1]) {
    gw = wrap(lazyx::convolution_backward_weight(g, lz(input), to_shape(weight.sizes()), o));
  }
  if (output_mask[2]) {
    // The bias gradient: grad_out summed over the spatial dims (contiguous), then the batch.
    const int64_t n = grad_output.size(0), c = grad_output.size(1);
    gb = wrap(g.reshape({n, c, n * c != 0 ? grad_output.numel() / (n * c) : 0}).sum({2}).sum({0}));
  }
  return {gi, gw, gb};
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "convolution_overrideable", LZ_FN(convolution_overrideable));
  impl(m, "convolution_backward_overrideable", LZ_FN(convolution_backward_overrideable));
}

}  // namespace

}  // namespace lazyx_bridge
