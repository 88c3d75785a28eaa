// Convolutions (1-D, 2-D, 3-D; strides, padding, dilation, groups, transposed) and their
// gradients. Input (N, C_in, *spatial); weight (C_out, C_in / groups, *kernel), or for a
// transposed convolution (C_in, C_out / groups, *kernel). Floating and integer dtypes (integers
// wrap on overflow); float32 is the fast one.
#pragma once

#include <optional>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx {

// Per spatial dim; a list of one value applies to every dim. Empty: the default (stride 1,
// padding 0, dilation 1, output_padding 0).
struct ConvOptions {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

// The bias (C_out) is added as a broadcast add, so it fuses with what follows.
Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const ConvOptions& options = {});
// The gradient of convolution() with respect to its input, of shape `input_shape`.
Tensor convolution_backward_input(const Tensor& grad_out, const Tensor& weight,
                                  const Shape& input_shape, const ConvOptions& options = {});
// The gradient with respect to the weight, of shape `weight_shape`.
Tensor convolution_backward_weight(const Tensor& grad_out, const Tensor& input,
                                   const Shape& weight_shape, const ConvOptions& options = {});

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {},
              ConvOptions options = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {},
              ConvOptions options = {});
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {},
              ConvOptions options = {});

}  // namespace lazyx
