// Pooling: max, average, adaptive and unpooling, as gathers over host-built tap tables.
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

int64_t param_at(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  if (v.empty()) return dflt;
  return v.size() == 1 ? v[0] : v[i];
}

void check_params(const char* op, const PoolParams& p) {
  const size_t nd = p.kernel.size();
  auto ok = [nd](const std::vector<int64_t>& v) {
    return v.empty() || v.size() == 1 || v.size() == nd;
  };
  if (nd == 0 || !ok(p.stride) || !ok(p.padding) || !ok(p.dilation)) {
    ir::fail(op, "stride, padding and dilation need one value or one per kernel dim (" +
                     std::to_string(nd) + "); pass matching lists.");
  }
}

// PyTorch's pooling_output_shape.
int64_t pool_out(const char* op, int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d,
                 bool ceil) {
  if (k <= 0 || s <= 0 || d <= 0 || pad < 0) {
    ir::fail(op,
             "kernel size, stride and dilation must be positive and padding non-negative; "
             "fix the pooling arguments.");
  }
  const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;
  if (out < 1) {
    ir::fail(op, "output size is too small for input size " + std::to_string(in) + " and kernel " +
                     std::to_string(k) + "; use a smaller kernel or more padding.");
  }
  return out;
}

// Window taps of one dim. Average weights are 1/divisor (PyTorch's avg_pool divide factor).
DimTaps window_taps(const char* op, int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d,
                    bool ceil, bool count_include_pad) {
  DimTaps t;
  t.in = in;
  t.k = k;
  t.out = pool_out(op, in, k, s, pad, d, ceil);
  for (int64_t o = 0; o < t.out; ++o) {
    const int64_t start = o * s - pad;
    const int64_t end = std::min(start + k, in + pad);
    const int64_t vcount = std::min(end, in) - std::max<int64_t>(start, 0);
    const double div = static_cast<double>(count_include_pad ? end - start : vcount);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = start + j * d;
      const bool v = i >= 0 && i < in;
      t.idx.push_back(v ? i : 0);
      t.valid.push_back(v);
      t.w.push_back(v && div > 0 ? 1.0 / div : 0.0);
    }
  }
  return t;
}

Taps pool_taps(const char* op, const Tensor& x, const PoolParams& p, bool count_include_pad,
               bool floating = true) {
  check_params(op, p);
  const size_t nd = p.kernel.size();
  check_spatial(op, x, nd, 1, floating);
  std::vector<DimTaps> dims;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t k = p.kernel[i];
    const int64_t pad = param_at(p.padding, i, 0), d = param_at(p.dilation, i, 1);
    if (2 * pad > d * (k - 1) + 1) {
      ir::fail(op, "padding " + std::to_string(pad) +
                       " is more than half the effective kernel size; use less padding.");
    }
    const int64_t in = x.size(x.dim() - static_cast<int64_t>(nd) + static_cast<int64_t>(i));
    dims.push_back(
        window_taps(op, in, k, param_at(p.stride, i, k), pad, d, p.ceil_mode, count_include_pad));
  }
  return combine_taps(dims);
}

DimTaps adaptive_taps(const char* op, int64_t in, int64_t out) {
  if (out <= 0 && in > 0) ir::fail(op, "output sizes must be positive; pass a size >= 1.");
  DimTaps t;
  t.in = in;
  t.out = out;
  for (int64_t o = 0; o < out; ++o) {
    t.k = std::max(t.k, ((o + 1) * in + out - 1) / out - (o * in) / out);
  }
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t j = 0; j < t.k; ++j) {
      const bool v = start + j < end;
      t.idx.push_back(v ? start + j : start);
      t.valid.push_back(v);
      t.w.push_back(v ? 1.0 / static_cast<double>(end - start) : 0.0);
    }
  }
  return t;
}

Taps adaptive_table(const char* op, const Tensor& x, const Shape& out_size) {
  const size_t nd = out_size.size();
  check_spatial(op, x, nd, 1, true);
  std::vector<DimTaps> dims;
  for (size_t i = 0; i < nd; ++i) {
    dims.push_back(adaptive_taps(op, x.size(x.dim() - static_cast<int64_t>(nd - i)), out_size[i]));
  }
  return combine_taps(dims);
}

std::pair<Tensor, Tensor> max_of_taps(const Tensor& x, Taps t, const char* op) {
  point_invalid_at_first_valid(op, t);
  return max_taps(x, t);
}

}  // namespace

std::pair<Tensor, Tensor> max_pool(const Tensor& x, const PoolParams& p) {
  return max_of_taps(x, pool_taps("max_pool", x, p, true), "max_pool");
}

Tensor max_pool_backward(const Tensor& grad, const Tensor& input, const Tensor& indices,
                         int64_t spatial_dims) {
  if (grad.shape() != indices.shape() || spatial_dims < 1 || input.dim() < spatial_dims ||
      grad.dim() != input.dim()) {
    ir::fail("max_pool_backward", "grad " + ir::shape_str(grad.shape()) + " and indices " +
                                      ir::shape_str(indices.shape()) +
                                      " must have the shape of "
                                      "the forward output; pass the forward's indices.");
  }
  const Shape ls = lead_shape(input.shape(), static_cast<size_t>(spatial_dims));
  const int64_t B = ir::shape_numel(ls), L = input.numel() / std::max<int64_t>(B, 1);
  Tensor g = grad.reshape({B, grad.numel() / std::max<int64_t>(B, 1)});
  return scatter_rows(g, indices.reshape(g.shape()), L).reshape(input.shape());
}

// Integer average pooling truncates the quotient toward zero, as eager does.
Tensor int_avg_pool(const Tensor& x, const Taps& t) {
  std::vector<int64_t> mask(t.valid.begin(), t.valid.end());
  std::vector<double> div(static_cast<size_t>(t.P), 1.0);
  for (int64_t p = 0; p < t.P; ++p) {
    for (int64_t k = 0; k < t.K; ++k) {
      if (t.valid[p * t.K + k] && t.w[p * t.K + k] != 0) div[p] = 1.0 / t.w[p * t.K + k];
    }
    div[p] = std::round(div[p]);
  }
  Tensor v = gather_taps(x.to(kInt64), t).mul(tensor<int64_t>(mask, {t.P, t.K})).sum({2});
  Shape out = lead_shape(x.shape(), t.in_size.size());
  out.insert(out.end(), t.out_size.begin(), t.out_size.end());
  Tensor q = v.to(kFloat64).div(tensor<double>(div, {t.P})).to(kInt64);
  return q.reshape(out).to(x.dtype());
}

Tensor avg_pool(const Tensor& x, const PoolParams& p, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  if (x.dtype() == kBool) ir::fail("avg_pool", "bool inputs are not supported; convert first.");
  Taps t = pool_taps("avg_pool", x, p, count_include_pad, false);
  if (divisor_override.has_value()) {
    if (*divisor_override == 0) ir::fail("avg_pool", "divisor must be not zero; pass another.");
    for (size_t i = 0; i < t.w.size(); ++i) {
      t.w[i] = t.valid[i] ? 1.0 / static_cast<double>(*divisor_override) : 0.0;
    }
  }
  if (!is_floating(x.dtype())) return int_avg_pool(x, t);
  return weighted_taps("avg_pool", x, t);
}

Tensor avg_pool_backward(const Tensor& grad, const Tensor& input, const PoolParams& p,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  Taps t = pool_taps("avg_pool_backward", input, p, count_include_pad);
  if (divisor_override.has_value()) {
    for (size_t i = 0; i < t.w.size(); ++i) {
      t.w[i] = t.valid[i] ? 1.0 / static_cast<double>(*divisor_override) : 0.0;
    }
  }
  return weighted_taps_backward(grad, t, input.shape(), input.dtype());
}

Tensor adaptive_avg_pool(const Tensor& x, const Shape& out_size) {
  return weighted_taps("adaptive_avg_pool", x, adaptive_table("adaptive_avg_pool", x, out_size));
}

Tensor adaptive_avg_pool_backward(const Tensor& grad, const Tensor& input, int64_t spatial_dims) {
  if (spatial_dims < 1 || grad.dim() < spatial_dims) {
    ir::fail("adaptive_avg_pool_backward", "grad " + ir::shape_str(grad.shape()) +
                                               " has fewer dims than spatial_dims; pass the "
                                               "forward output's gradient.");
  }
  Shape out(grad.shape().end() - spatial_dims, grad.shape().end());
  Taps t = adaptive_table("adaptive_avg_pool_backward", input, out);
  return weighted_taps_backward(grad, t, input.shape(), input.dtype());
}

std::pair<Tensor, Tensor> adaptive_max_pool(const Tensor& x, const Shape& out_size) {
  return max_of_taps(x, adaptive_table("adaptive_max_pool", x, out_size), "adaptive_max_pool");
}

Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& out_size) {
  const size_t nd = out_size.size();
  check_spatial("max_unpool", x, nd, 1, false);
  if (indices.shape() != x.shape()) {
    ir::fail("max_unpool", "indices " + ir::shape_str(indices.shape()) +
                               " must have the shape of "
                               "the input " +
                               ir::shape_str(x.shape()) + "; pass max_pool's indices.");
  }
  Shape lead = lead_shape(x.shape(), nd);
  const int64_t B = ir::shape_numel(lead), L = ir::shape_numel(out_size);
  const int64_t P = x.numel() / std::max<int64_t>(B, 1);
  Tensor r = zeros({B, L}, x.dtype()).scatter(1, indices.reshape({B, P}), x.reshape({B, P}));
  lead.insert(lead.end(), out_size.begin(), out_size.end());
  return r.reshape(lead);
}

}  // namespace lazyx
