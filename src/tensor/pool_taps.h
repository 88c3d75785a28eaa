// Tap tables shared by pooling, resampling and padding: for each output position of the
// flattened spatial plane, K (input index, weight) taps. Per-dim taps multiply into the table.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lazyx/pool.h"

namespace lazyx::detail {

struct DimTaps {
  int64_t in = 0, out = 0, k = 0;
  std::vector<int64_t> idx;    // out * k
  std::vector<double> w;       // out * k
  std::vector<uint8_t> valid;  // out * k
};

struct Taps {
  Shape in_size, out_size;  // spatial
  int64_t P = 1, K = 1, L = 1;
  std::vector<int64_t> idx;  // P * K, flat indices into the input plane
  std::vector<double> w;
  std::vector<uint8_t> valid;
};

// The row-major product of per-dim taps.
Taps combine_taps(const std::vector<DimTaps>& dims);
// Invalid taps (padding) repeat the row's first valid tap: max pooling then ignores them.
void point_invalid_at_first_valid(const char* op, Taps& t);

// The dtype the weighted sums run in (16-bit floats in float32, as eager's accumulation).
Dtype compute_dtype(Dtype d);
// x's trailing nd dims are the plane: [B, P, K] taps of x (B = numel of the leading dims).
Tensor gather_taps(const Tensor& x, const Taps& t);
// x's leading dims + out_size, each output the weighted sum of its taps.
Tensor weighted_taps(const char* op, const Tensor& x, const Taps& t);
// contrib [B, P * K] added at the taps into zeros of [B, L].
Tensor scatter_taps(const Tensor& contrib, const Taps& t);
// The gradient of weighted_taps: input_shape is the forward input's shape.
Tensor weighted_taps_backward(const Tensor& grad, const Taps& t, const Shape& input_shape,
                              Dtype dtype);

// Max over each row of taps (valid taps only): values and input-plane indices, shaped as
// x's leading dims + out_size.
std::pair<Tensor, Tensor> max_taps(const Tensor& x, const Taps& t);
// One tap per output (K == 1): the taps copied, any dtype.
Tensor copy_taps(const Tensor& x, const Taps& t);
// g [B, P] added into zeros [B, L] at per-row indices [B, P] (max pooling's gradient).
Tensor scatter_rows(const Tensor& g, const Tensor& indices, int64_t L);

// Checks x has at least nd + min_lead dims and is floating point.
void check_spatial(const char* op, const Tensor& x, size_t nd, int64_t min_lead, bool floating);
Shape lead_shape(const Shape& s, size_t nd);

}  // namespace lazyx::detail
