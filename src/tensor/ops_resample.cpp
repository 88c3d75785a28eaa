// Resampling (nearest, linear, cubic), reflection/replication padding and im2col/col2im, as
// gathers over host-built tap tables; their gradients are scatter-adds over the same tables.
#include <algorithm>
#include <cmath>
#include <string>

#include "lazyx/ops.h"
#include "lazyx/pool.h"
#include "tensor/ops_common.h"
#include "tensor/pool_taps.h"

namespace lazyx {

using namespace detail;

namespace {

// PyTorch's compute_scales_value / area_pixel_compute_scale.
double scale_value(std::optional<double> s, int64_t in, int64_t out) {
  return s.has_value() && *s > 0 ? 1.0 / *s : static_cast<double>(in) / static_cast<double>(out);
}
double area_scale(int64_t in, int64_t out, bool align, std::optional<double> s) {
  if (align) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  return scale_value(s, in, out);
}

void push_tap(DimTaps& t, int64_t i, double w) {
  t.idx.push_back(i);
  t.w.push_back(w);
  t.valid.push_back(1);
}

// PyTorch's nearest_idx (float arithmetic, as eager).
int64_t nearest_index(int64_t o, int64_t in, int64_t out, std::optional<double> s, bool exact) {
  if (!exact && out == in) return o;
  if (!exact && out == 2 * in) return o >> 1;
  const float scale = static_cast<float>(scale_value(s, in, out));
  const float src = exact ? (static_cast<float>(o) + 0.5f) * scale : static_cast<float>(o) * scale;
  return std::min(static_cast<int64_t>(std::floor(src)), in - 1);
}

double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

DimTaps interp_taps(int64_t in, int64_t out, InterpMode mode, bool align, std::optional<double> s) {
  DimTaps t;
  t.in = in;
  t.out = out;
  t.k = mode == InterpMode::Linear ? 2 : mode == InterpMode::Cubic ? 4 : 1;
  const double scale = area_scale(in, out, align, s);
  for (int64_t o = 0; o < out; ++o) {
    if (mode == InterpMode::Nearest || mode == InterpMode::NearestExact) {
      push_tap(t, nearest_index(o, in, out, s, mode == InterpMode::NearestExact), 1.0);
      continue;
    }
    double src =
        align ? scale * static_cast<double>(o) : scale * (static_cast<double>(o) + 0.5) - 0.5;
    if (mode == InterpMode::Linear) {
      src = std::max(src, 0.0);
      const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
      const double l1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
      push_tap(t, i0, 1.0 - l1);
      push_tap(t, i0 + (i0 < in - 1 ? 1 : 0), l1);
      continue;
    }
    const int64_t i0 = static_cast<int64_t>(std::floor(src));
    const double x = src - static_cast<double>(i0), a = -0.75;
    const double c[4] = {cubic2(x + 1, a), cubic1(x, a), cubic1(1 - x, a), cubic2(2 - x, a)};
    for (int64_t j = 0; j < 4; ++j) push_tap(t, std::clamp<int64_t>(i0 - 1 + j, 0, in - 1), c[j]);
  }
  return t;
}

Taps interp_table(const char* op, const Shape& in_shape, const Shape& out_size, InterpMode mode,
                  bool align, const std::vector<std::optional<double>>& scales) {
  const size_t nd = out_size.size();
  if (nd == 0 || in_shape.size() < nd + 1 || (!scales.empty() && scales.size() != nd)) {
    ir::fail(op, "input " + ir::shape_str(in_shape) + " and output size " +
                     ir::shape_str(out_size) +
                     " do not match; pass one size (and scale) per "
                     "spatial dim.");
  }
  std::vector<DimTaps> dims;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = in_shape[in_shape.size() - nd + i];
    if (out_size[i] <= 0 || in <= 0) {
      ir::fail(op, "input and output sizes must be positive, got " + ir::shape_str(in_shape) +
                       " -> " + ir::shape_str(out_size) + "; pass positive sizes.");
    }
    dims.push_back(
        interp_taps(in, out_size[i], mode, align, scales.empty() ? std::nullopt : scales[i]));
  }
  return combine_taps(dims);
}

Taps pad_table(const char* op, const Shape& in_shape, const std::vector<int64_t>& pads,
               PadMode mode) {
  const size_t nd = pads.size() / 2;
  if (pads.size() % 2 != 0 || nd == 0 || in_shape.size() < nd + 1) {
    ir::fail(op, "padding needs two values per padded dim and a batch or channel dim, got " +
                     std::to_string(pads.size()) + " values for " + ir::shape_str(in_shape) +
                     "; pass (left, right) pairs, last dim first.");
  }
  std::vector<DimTaps> dims;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = in_shape[in_shape.size() - nd + i];
    const int64_t lo = pads[2 * (nd - 1 - i)], hi = pads[2 * (nd - 1 - i) + 1];
    const bool reflect = mode == PadMode::Reflect;
    if (reflect ? (lo >= in || hi >= in) : in == 0 || in + lo + hi <= 0) {
      ir::fail(op, "padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                       ") does not fit a dim of size " + std::to_string(in) +
                       (reflect ? "; reflection needs padding < the dim size."
                                : "; pad a non-empty dim to a positive size."));
    }
    DimTaps t;
    t.in = in;
    t.out = in + lo + hi;
    t.k = 1;
    for (int64_t o = 0; o < t.out; ++o) {
      int64_t j = o - lo;
      if (reflect) {
        j = j < 0 ? -j : j;
        j = j >= in ? 2 * (in - 1) - j : j;
      }
      push_tap(t, std::clamp<int64_t>(j, 0, in - 1), 1.0);
    }
    dims.push_back(t);
  }
  return combine_taps(dims);
}

}  // namespace

Tensor interpolate(const Tensor& x, const Shape& out_size, InterpMode mode, bool align_corners,
                   const std::vector<std::optional<double>>& scales) {
  const bool nearest = mode == InterpMode::Nearest || mode == InterpMode::NearestExact;
  check_spatial("interpolate", x, out_size.size(), 1, !nearest);
  Taps t = interp_table("interpolate", x.shape(), out_size, mode, align_corners, scales);
  if (t.K == 1) return copy_taps(x, t);
  return weighted_taps("interpolate", x, t);
}

Tensor interpolate_backward(const Tensor& grad, const Shape& input_size, InterpMode mode,
                            bool align_corners, const std::vector<std::optional<double>>& scales) {
  const size_t nd = input_size.size() >= 2 ? std::min<size_t>(input_size.size() - 2, 3) : 0;
  const size_t n = scales.empty() ? nd : scales.size();
  if (grad.dim() < static_cast<int64_t>(n) + 1) {
    ir::fail("interpolate_backward", "grad " + ir::shape_str(grad.shape()) +
                                         " has too few dims; pass the output's gradient.");
  }
  Shape out(grad.shape().end() - static_cast<int64_t>(n), grad.shape().end());
  Taps t = interp_table("interpolate_backward", input_size, out, mode, align_corners, scales);
  return weighted_taps_backward(grad, t, input_size, grad.dtype());
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode) {
  return copy_taps(x, pad_table("pad", x.shape(), pads, mode));
}

Tensor pad_backward(const Tensor& grad, const Shape& input_size, const std::vector<int64_t>& pads,
                    PadMode mode) {
  return weighted_taps_backward(grad, pad_table("pad_backward", input_size, pads, mode), input_size,
                                grad.dtype());
}

namespace {

Taps block_taps(const char* op, int64_t h, int64_t w, const PoolParams& p) {
  if (p.kernel.size() != 2 || p.stride.size() != 2 || p.padding.size() != 2 ||
      p.dilation.size() != 2) {
    ir::fail(op, "kernel, dilation, padding and stride need two values each; pass pairs.");
  }
  std::vector<DimTaps> dims;
  const int64_t in[2] = {h, w};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = p.kernel[i], s = p.stride[i], pad = p.padding[i], d = p.dilation[i];
    if (k <= 0 || s <= 0 || d <= 0 || pad < 0) {
      ir::fail(op,
               "kernel, stride and dilation must be positive, padding non-negative; fix "
               "the arguments.");
    }
    const int64_t out = (in[i] + 2 * pad - d * (k - 1) - 1) / s + 1;
    if (in[i] + 2 * pad - d * (k - 1) - 1 < 0 || out <= 0) {
      ir::fail(op, "the blocks do not fit the padded input (size " + std::to_string(in[i]) +
                       "); use a smaller kernel or more padding.");
    }
    DimTaps t;
    t.in = in[i];
    t.out = out;
    t.k = k;
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t ii = o * s - pad + j * d;
        const bool v = ii >= 0 && ii < in[i];
        t.idx.push_back(v ? ii : 0);
        t.w.push_back(v ? 1.0 : 0.0);
        t.valid.push_back(v);
      }
    }
    dims.push_back(t);
  }
  return combine_taps(dims);
}

}  // namespace

Tensor im2col(const Tensor& x, const PoolParams& p) {
  check_spatial("im2col", x, 2, 1, false);
  const bool batched = x.dim() == 4;
  Tensor x4 = batched ? x : x.unsqueeze(0);
  Taps t = block_taps("im2col", x4.size(2), x4.size(3), p);
  const int64_t N = x4.size(0), C = x4.size(1);
  Tensor v = gather_taps(x4, t);  // [N*C, P, K]
  if (is_floating(x.dtype())) {
    v = v.mul(tensor<double>(t.w, {t.P, t.K}).to(x.dtype()));
  } else {
    std::vector<int64_t> w(t.valid.begin(), t.valid.end());
    v = v.mul(tensor<int64_t>(w, {t.P, t.K}).to(x.dtype()));
  }
  Tensor r = v.reshape({N, C, t.P, t.K}).permute({0, 1, 3, 2}).reshape({N, C * t.K, t.P});
  return batched ? r : r.squeeze(0);
}

Tensor col2im(const Tensor& cols, const Shape& out_hw, const PoolParams& p) {
  if ((cols.dim() != 2 && cols.dim() != 3) || out_hw.size() != 2) {
    ir::fail("col2im", "expected a 2-D or 3-D input and a 2-value output size, got " +
                           ir::shape_str(cols.shape()) + "; pass (N,) C*kh*kw, L columns.");
  }
  const bool batched = cols.dim() == 3;
  Tensor c3 = batched ? cols : cols.unsqueeze(0);
  Taps t = block_taps("col2im", out_hw[0], out_hw[1], p);
  const int64_t N = c3.size(0);
  if (c3.size(1) % t.K != 0 || c3.size(2) != t.P) {
    ir::fail("col2im", "input " + ir::shape_str(cols.shape()) + " does not match " +
                           std::to_string(t.K) + " kernel positions and " + std::to_string(t.P) +
                           " blocks; check kernel_size, stride and output_size.");
  }
  const int64_t C = c3.size(1) / t.K;
  Tensor v = c3.reshape({N * C, t.K, t.P}).permute({0, 2, 1});  // [N*C, P, K]
  Tensor m = tensor<int64_t>(std::vector<int64_t>(t.valid.begin(), t.valid.end()), {t.P, t.K});
  v = v.mul(m.to(cols.dtype())).reshape({N * C, t.P * t.K});
  Tensor r = scatter_taps(v, t).reshape({N, C, out_hw[0], out_hw[1]});
  return batched ? r : r.squeeze(0);
}

}  // namespace lazyx
