// Pooling, normalization, resampling and padding (free functions over the trailing spatial dims).
// Each op is a composition of gathers, reductions and elementwise ops with host-built index and
// weight tables (run-time operands), so new shapes compile once and backward passes are scatters.
#pragma once

#include <array>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx {

// Window geometry over the last kernel.size() dims; stride, padding and dilation have one entry
// per spatial dim (empty stride = kernel, empty padding = 0, empty dilation = 1).
struct PoolParams {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

// Max pooling: values and int64 indices into each flattened input plane (PyTorch's layout).
std::pair<Tensor, Tensor> max_pool(const Tensor& x, const PoolParams& p);
// Gradient of max_pool / adaptive_max_pool: grad scattered (added) at the indices.
Tensor max_pool_backward(const Tensor& grad, const Tensor& input, const Tensor& indices,
                         int64_t spatial_dims);
Tensor avg_pool(const Tensor& x, const PoolParams& p, bool count_include_pad = true,
                std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool_backward(const Tensor& grad, const Tensor& input, const PoolParams& p,
                         bool count_include_pad = true,
                         std::optional<int64_t> divisor_override = std::nullopt);
// Adaptive pooling to `out_size` (one entry per spatial dim).
Tensor adaptive_avg_pool(const Tensor& x, const Shape& out_size);
Tensor adaptive_avg_pool_backward(const Tensor& grad, const Tensor& input, int64_t spatial_dims);
std::pair<Tensor, Tensor> adaptive_max_pool(const Tensor& x, const Shape& out_size);
// Writes x at `indices` (as returned by max_pool) of zero planes of `out_size`.
Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& out_size);

// Resampling of the trailing out_size.size() dims; `scales` (one per dim, or empty) are the
// user's scale factors as PyTorch's upsample_* ops take them.
enum class InterpMode { Nearest, NearestExact, Linear, Cubic };
Tensor interpolate(const Tensor& x, const Shape& out_size, InterpMode mode, bool align_corners,
                   const std::vector<std::optional<double>>& scales = {});
// `input_size` is the forward input's shape [N, C, spatial...] (with scales given, their count
// is the number of spatial dims).
Tensor interpolate_backward(const Tensor& grad, const Shape& input_size, InterpMode mode,
                            bool align_corners,
                            const std::vector<std::optional<double>>& scales = {});

// Padding in PyTorch's order (last dim first: left, right, top, bottom, ...).
enum class PadMode { Reflect, Replicate };
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode);
Tensor pad_backward(const Tensor& grad, const Shape& input_size, const std::vector<int64_t>& pads,
                    PadMode mode);

// Sliding blocks of [N,] C, H, W as [N,] C*kh*kw, L (torch.nn.functional.unfold), and back.
Tensor im2col(const Tensor& x, const PoolParams& p);
Tensor col2im(const Tensor& cols, const Shape& out_hw, const PoolParams& p);

// Batch norm over all dims but 1. Training: batch statistics; running_mean/running_var (if
// defined) are updated in place with `momentum` (unbiased variance). Eval: running statistics.
// Returns out, the saved mean and the saved 1/sqrt(var + eps) (empty in eval mode).
std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& x, const Tensor& weight,
                                              const Tensor& bias, Tensor running_mean,
                                              Tensor running_var, bool training, double momentum,
                                              double eps);
// Gradients (input, weight, bias) as native_batch_norm_backward; undefined where mask is false.
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool training,
    double eps, std::array<bool, 3> mask);
// Group norm of [N, C, *]: out, mean [N, groups], rstd [N, groups].
std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& x, const Tensor& weight,
                                              const Tensor& bias, int64_t groups, double eps);
std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& x,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight, int64_t groups,
                                                       std::array<bool, 3> mask);

}  // namespace lazyx
