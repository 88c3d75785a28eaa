// Tap tables: the product of per-dim taps, and the gathers and scatters that apply them.
#include "tensor/pool_taps.h"

#include <string>

#include "lazyx/ops.h"
#include "tensor/ops_common.h"
#include "tensor/tensor_impl.h"

namespace lazyx::detail {

Taps combine_taps(const std::vector<DimTaps>& dims) {
  Taps t;
  t.idx = {0};
  t.w = {1.0};
  t.valid = {1};
  t.P = 1;
  t.K = 1;
  t.L = 1;
  for (const DimTaps& d : dims) {
    t.in_size.push_back(d.in);
    t.out_size.push_back(d.out);
    std::vector<int64_t> idx;
    std::vector<double> w;
    std::vector<uint8_t> valid;
    const int64_t P = t.P * d.out, K = t.K * d.k;
    idx.reserve(P * K);
    w.reserve(P * K);
    valid.reserve(P * K);
    for (int64_t p = 0; p < t.P; ++p) {
      for (int64_t o = 0; o < d.out; ++o) {
        for (int64_t k = 0; k < t.K; ++k) {
          for (int64_t j = 0; j < d.k; ++j) {
            const int64_t a = p * t.K + k, b = o * d.k + j;
            idx.push_back(t.idx[a] * d.in + d.idx[b]);
            w.push_back(t.w[a] * d.w[b]);
            valid.push_back(t.valid[a] && d.valid[b]);
          }
        }
      }
    }
    t.idx = std::move(idx);
    t.w = std::move(w);
    t.valid = std::move(valid);
    t.P = P;
    t.K = K;
    t.L *= d.in;
  }
  return t;
}

void point_invalid_at_first_valid(const char* op, Taps& t) {
  for (int64_t p = 0; p < t.P; ++p) {
    int64_t first = -1;
    for (int64_t k = 0; k < t.K && first < 0; ++k) {
      if (t.valid[p * t.K + k]) first = t.idx[p * t.K + k];
    }
    if (first < 0) {
      ir::fail(op,
               "a pooling window lies entirely in the padding; use padding at most half the "
               "kernel size.");
    }
    for (int64_t k = 0; k < t.K; ++k) {
      if (!t.valid[p * t.K + k]) t.idx[p * t.K + k] = first;
    }
  }
}

Dtype compute_dtype(Dtype d) { return d == kFloat16 || d == kBFloat16 ? kFloat32 : d; }

Shape lead_shape(const Shape& s, size_t nd) { return Shape(s.begin(), s.end() - nd); }

void check_spatial(const char* op, const Tensor& x, size_t nd, int64_t min_lead, bool floating) {
  if (x.dim() < static_cast<int64_t>(nd) + min_lead || x.dim() > static_cast<int64_t>(nd) + 2) {
    ir::fail(op, "expected a " + std::to_string(nd + min_lead) + "-D or " + std::to_string(nd + 2) +
                     "-D input, got shape " + ir::shape_str(x.shape()) +
                     "; add or remove batch dims.");
  }
  if (floating && !is_floating(x.dtype())) {
    ir::fail(op, std::string("expected a floating point input, got ") + dtype_name(x.dtype()) +
                     "; convert it with .to(float32) first.");
  }
}

namespace {

int64_t lead_numel(const Shape& s, size_t nd) { return ir::shape_numel(lead_shape(s, nd)); }

Shape out_shape(const Shape& in, const Taps& t) {
  Shape s = lead_shape(in, t.in_size.size());
  s.insert(s.end(), t.out_size.begin(), t.out_size.end());
  return s;
}

}  // namespace

Tensor gather_taps(const Tensor& x, const Taps& t) {
  const int64_t B = lead_numel(x.shape(), t.in_size.size());
  Tensor idx = tensor<int64_t>(t.idx, {t.P * t.K});
  return x.reshape({B, t.L}).index_select(1, idx).reshape({B, t.P, t.K});
}

Tensor tap_op(ir::Op op, Dtype dtype, const Shape& shape, const std::vector<Tensor>& operands,
              ir::Attrs attrs) {
  EngineLock lock(engine_mutex());
  const char* name = ir::op_name(op);
  std::vector<ir::NodePtr> nodes;
  for (const Tensor& t : operands) nodes.push_back(impl_of(name, t).value(name));
  return make_tensor(ir::make_node(op, dtype, shape, std::move(nodes), std::move(attrs)));
}

Tensor weighted_taps(const char*, const Tensor& x, const Taps& t) {
  const Dtype cd = compute_dtype(x.dtype());
  const int64_t B = lead_numel(x.shape(), t.in_size.size());
  Tensor xc = (x.dtype() == cd ? x : x.to(cd)).reshape({B, t.L});
  ir::Attrs a;
  a.ints = {t.K};
  Tensor r = tap_op(ir::Op::TapSum, cd, {B, t.P},
                    {xc, tensor<int64_t>(t.idx, {t.P * t.K}), tensor<double>(t.w).to(cd)}, a);
  r = r.reshape(out_shape(x.shape(), t));
  return cd == x.dtype() ? r : r.to(x.dtype());
}

Tensor scatter_taps(const Tensor& contrib, const Taps& t) {
  // contrib [B, P * K] with unit weights: one tap per (p, k) entry.
  ir::Attrs a;
  a.ints = {t.L, 1};
  return tap_op(ir::Op::TapScatter, contrib.dtype(), {contrib.size(0), t.L},
                {contrib, tensor<int64_t>(t.idx, {t.P * t.K})}, a);
}

Tensor weighted_taps_backward(const Tensor& grad, const Taps& t, const Shape& input_shape,
                              Dtype dtype) {
  const Dtype cd = compute_dtype(dtype);
  const int64_t B = lead_numel(input_shape, t.in_size.size());
  Tensor g = grad.to(cd).reshape({B, t.P});
  ir::Attrs a;
  a.ints = {t.L, t.K};
  Tensor r = tap_op(ir::Op::TapScatter, cd, {B, t.L},
                    {g, tensor<int64_t>(t.idx, {t.P * t.K}), tensor<double>(t.w).to(cd)}, a);
  r = r.reshape(input_shape);
  return cd == dtype ? r : r.to(dtype);
}

namespace {

Tensor max_op(const Tensor& x, const Taps& t, bool want_index) {
  const int64_t B = lead_numel(x.shape(), t.in_size.size());
  ir::Attrs a;
  a.ints = {t.K};
  a.flag = want_index;
  Tensor r = tap_op(ir::Op::TapMax, want_index ? kInt64 : x.dtype(), {B, t.P},
                    {x.reshape({B, t.L}), tensor<int64_t>(t.idx, {t.P * t.K})}, a);
  return r.reshape(out_shape(x.shape(), t));
}

}  // namespace

std::pair<Tensor, Tensor> max_taps(const Tensor& x, const Taps& t) {
  return {max_op(x, t, false), max_op(x, t, true)};
}

Tensor copy_taps(const Tensor& x, const Taps& t) { return max_op(x, t, false); }

Tensor scatter_rows(const Tensor& g, const Tensor& indices, int64_t L) {
  ir::Attrs a;
  a.ints = {L, 1};
  return tap_op(ir::Op::TapScatter, g.dtype(), {g.size(0), L}, {g, indices.to(kInt64)}, a);
}

}  // namespace lazyx::detail
