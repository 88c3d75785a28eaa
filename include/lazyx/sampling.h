// Grid sampling and segment reductions (free functions, lazy like every op).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "lazyx/tensor.h"

namespace lazyx {

// grid_sample's interpolation and padding (PyTorch's GridSamplerInterpolation/-Padding values;
// the IR op GridSample keeps them in attrs.ints).
enum class GridMode : int64_t { Bilinear = 0, Nearest = 1, Bicubic = 2 };
enum class GridPadding : int64_t { Zeros = 0, Border = 1, Reflection = 2 };

// input [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x then y, -1 and 1 the edges): [N, C, Ho,
// Wo], as PyTorch's grid_sampler_2d (floating dtypes; grid of input's dtype).
Tensor grid_sample(const Tensor& input, const Tensor& grid, GridMode mode = GridMode::Bilinear,
                   GridPadding padding = GridPadding::Zeros, bool align_corners = false);
// The gradients of grid_sample for grad_out [N, C, Ho, Wo]: of the input, and of the grid.
Tensor grid_sample_backward_input(const Tensor& grad_out, const Tensor& input, const Tensor& grid,
                                  GridMode mode, GridPadding padding, bool align_corners);
Tensor grid_sample_backward_grid(const Tensor& grad_out, const Tensor& input, const Tensor& grid,
                                 GridMode mode, GridPadding padding, bool align_corners);

// What segment_reduce combines (the IR op SegmentReduce keeps it in attrs.ints[0]).
enum class SegmentKind : int64_t { Sum = 0, Mean = 1, Max = 2, Min = 3, Prod = 4 };

// Reduces data along `axis` in segments given by int64 offsets: offsets has data's dims before
// axis, then S + 1 entries; segment s is [offsets[s], offsets[s + 1]). The result has S entries
// along axis. Without `initial`, empty segments give the reduction's identity (mean: NaN).
// `safe` also checks that the segments cover the whole axis (PyTorch's unsafe=False); offsets
// outside the axis always fail when the step runs.
Tensor segment_reduce(const Tensor& data, const Tensor& offsets, SegmentKind kind, int64_t axis,
                      std::optional<double> initial = std::nullopt, bool safe = true);
// The gradient of segment_reduce with respect to data (PyTorch's _segment_reduce_backward).
Tensor segment_reduce_backward(const Tensor& grad, const Tensor& output, const Tensor& data,
                               const Tensor& offsets, SegmentKind kind, int64_t axis,
                               std::optional<double> initial = std::nullopt);

// PyTorch's histogram: counts of x's elements (or sums of `weight`, x's shape, if defined) in
// the bins between 1-D `edges` of x's dtype (binary search, so unsorted edges behave as eager's
// std::upper_bound); with `density`, divided by the total and the bin widths. Returns (hist,
// bin_edges).
std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& edges, const Tensor& weight,
                                    bool density = false);
// `bins` equal bins over `range`, else over [min(x), max(x)] ([0, 1] for an empty x), widened by
// 0.5 each way when the ends are equal; the edges as torch.linspace in x's dtype.
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const Tensor& weight, bool density = false);

}  // namespace lazyx
