// Kernels: losses beyond nll/mse (binary cross entropy, smooth L1, Huber, 2-D nll, margin
// losses) with their backward ops, and embedding_bag (sum, mean, max) with its backward.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

bool has(const optional<Tensor>& t) { return t.has_value() && t->defined(); }
// reduction: 0 none, 1 mean, 2 sum.
LT reduce(const LT& l, int64_t red) {
  if (red == 0) return l;
  return red == 2 ? l.sum() : l.mean();
}
// The upstream gradient of an elementwise loss, scaled for the mean.
LT grad_scale(const Tensor& grad, const Tensor& self, int64_t red) {
  LT g = lz(grad);
  if (red == 1) g = g.div(static_cast<double>(std::max<int64_t>(1, self.numel())));
  return g;
}

Tensor bce(const Tensor& self, const Tensor& target, const optional<Tensor>& w, int64_t red) {
  LT x = lz(self), y = lz(target);
  LT lx = x.log().clamp(-100.0, std::nullopt), l1x = x.neg().add(1.0).log().clamp(-100.0, std::nullopt);
  LT l = y.mul(lx).add(y.neg().add(1.0).mul(l1x)).neg();
  if (has(w)) l = l.mul(lz(*w));
  return wrap(reduce(l, red));
}
Tensor bce_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                    const optional<Tensor>& w, int64_t red) {
  LT x = lz(self), y = lz(target);
  LT den = x.neg().add(1.0).mul(x).clamp(1e-12, std::nullopt);
  LT g = x.sub(y).div(den).mul(grad_scale(grad, self, red));
  if (has(w)) g = g.mul(lz(*w));
  return wrap(g);
}
Tensor smooth_l1(const Tensor& self, const Tensor& target, int64_t red, double beta) {
  LT d = lz(self).sub(operand(target, lz(self))).abs();
  LT l = beta == 0.0 ? d : lazyx::where(d.lt(beta), d.mul(d).mul(0.5 / beta), d.sub(0.5 * beta));
  return wrap(reduce(l, red));
}
Tensor& smooth_l1_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                           int64_t red, double beta, Tensor& gi) {
  LT d = lz(self).sub(operand(target, lz(self)));
  LT g = beta == 0.0 ? lazyx::sign(d)
                       : lazyx::where(d.abs().lt(beta), d.div(beta), lazyx::sign(d));
  return write_out(gi, g.mul(grad_scale(grad, self, red)));
}
Tensor huber(const Tensor& self, const Tensor& target, int64_t red, double delta) {
  LT d = lz(self).sub(operand(target, lz(self))).abs();
  LT l = lazyx::where(d.lt(delta), d.mul(d).mul(0.5), d.sub(0.5 * delta).mul(delta));
  return wrap(reduce(l, red));
}
Tensor& huber_backward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t red,
                       double delta, Tensor& gi) {
  LT d = lz(self).sub(operand(target, lz(self)));
  return write_out(gi, d.clamp(-delta, delta).mul(grad_scale(grad, self, red)));
}

// nll_loss2d: [N, C, d...] as [N * d..., C] through nll_loss.
Tensor to_rows(const Tensor& self) {
  std::vector<int64_t> perm{0};
  for (int64_t d = 2; d < self.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return self.permute(perm).reshape({-1, self.size(1)});
}
std::tuple<Tensor, Tensor> nll2d(const Tensor& self, const Tensor& target,
                                 const optional<Tensor>& w, int64_t red, int64_t ignore) {
  auto [l, tw] = at::nll_loss_forward(to_rows(self), target.reshape({-1}), w, red, ignore);
  if (red == 0) l = l.reshape(target.sizes());
  return {l, tw};
}
Tensor nll2d_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                      const optional<Tensor>& w, int64_t red, int64_t ignore, const Tensor& tw) {
  Tensor g = red == 0 ? grad.reshape({-1}) : grad;
  Tensor gi = at::nll_loss_backward(g, to_rows(self), target.reshape({-1}), w, red, ignore, tw);
  std::vector<int64_t> shape{self.size(0)};
  for (int64_t d = 2; d < self.dim(); ++d) shape.push_back(self.size(d));
  shape.push_back(self.size(1));
  std::vector<int64_t> perm{0, self.dim() - 1};
  for (int64_t d = 1; d < self.dim() - 1; ++d) perm.push_back(d);
  return gi.reshape(shape).permute(perm).contiguous();
}

// multi_margin_loss: sum over j != y of max(0, margin - x[y] + x[j])^p (times w[y]) / C.
struct Margin {
  LT x, t, xy, z, w;  // x [N, C], target [N, 1], x[y], margin - x[y] + x[j] (0 at j == y)
};
Margin margin_terms(const Tensor& self, const Tensor& target, const c10::Scalar& margin,
                    const optional<Tensor>& weight) {
  Margin m;
  m.x = lz(self);
  if (self.dim() <= 1) m.x = m.x.reshape({1, self.numel()});
  m.t = lz(target).reshape({m.x.size(0), 1});
  m.xy = m.x.gather(1, m.t);
  LT off = lazyx::arange(0, m.x.size(1), 1, lazyx::kInt64).unsqueeze(0).ne(m.t);
  m.z = lazyx::where(off, m.x.sub(m.xy).add(margin.toDouble()), lazyx::zeros({}, m.x.dtype()));
  m.w = has(weight) ? lz(*weight).index_select(0, m.t.reshape({m.x.size(0)})).unsqueeze(1)
                    : lazyx::ones({}, m.x.dtype());
  return m;
}
Tensor multi_margin(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                    const c10::Scalar& margin, const optional<Tensor>& weight, int64_t red) {
  TORCH_CHECK(p.toDouble() == 1 || p.toDouble() == 2, "[multi_margin_loss] p must be 1 or 2.");
  Margin m = margin_terms(self, target, margin, weight);
  LT h = m.z.relu();
  if (p.toDouble() == 2) h = h.mul(h);
  LT l = h.mul(m.w).sum({1}).div(static_cast<double>(m.x.size(1)));
  if (red == 0) return wrap(self.dim() <= 1 ? l.reshape({}) : l);
  return wrap(reduce(l, red));
}
Tensor multi_margin_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                             const c10::Scalar& p, const c10::Scalar& margin,
                             const optional<Tensor>& weight, int64_t red) {
  Margin m = margin_terms(self, target, margin, weight);
  LT active = m.z.gt(0.0).to(m.x.dtype());
  LT gj = p.toDouble() == 2 ? m.z.relu().mul(2.0) : active;
  gj = gj.mul(m.w).div(static_cast<double>(m.x.size(1)));
  LT gy = gj.sum({1}, true).neg();
  LT g = gj.scatter_add(1, m.t, gy);
  LT go = lz(grad);
  if (red == 0) go = go.reshape({m.x.size(0), 1});
  if (red == 1) go = go.div(static_cast<double>(m.x.size(0)));
  return wrap(g.mul(go).reshape(to_shape(self.sizes())));
}

// multilabel_margin_loss: targets are the labels before the first -1 of each row.
struct Multilabel {
  LT x, valid, tsafe, is_target, term;  // term [N, K, C] of 1 - (x[y_k] - x[j])
};
Multilabel multilabel_terms(const Tensor& self, const Tensor& target) {
  Multilabel m;
  m.x = lz(self);
  LT t = lz(target);
  if (self.dim() <= 1) {
    m.x = m.x.reshape({1, self.numel()});
    t = t.reshape({1, target.numel()});
  }
  m.valid = lazyx::cumprod(t.ne(li(-1)).to(lazyx::kInt64), 1).to(m.x.dtype());
  m.tsafe = lazyx::where(t.ge(li(0)), t, lazyx::zeros({}, lazyx::kInt64));
  m.is_target = lazyx::zeros(m.x.shape(), m.x.dtype()).scatter_add(1, m.tsafe, m.valid).gt(0.0)
                    .to(m.x.dtype());
  LT xy = m.x.gather(1, m.tsafe);
  m.term = m.x.unsqueeze(1).sub(xy.unsqueeze(2)).add(1.0);
  return m;
}
std::tuple<Tensor, Tensor> multilabel_forward(const Tensor& self, const Tensor& target, int64_t red) {
  Multilabel m = multilabel_terms(self, target);
  LT mask = m.valid.unsqueeze(2).mul(m.is_target.neg().add(1.0).unsqueeze(1));
  LT l = m.term.relu().mul(mask).sum({1, 2}).div(static_cast<double>(m.x.size(1)));
  LT it = m.is_target.reshape(to_shape(self.sizes()));
  if (red == 0) return {wrap(self.dim() <= 1 ? l.reshape({}) : l), wrap(it)};
  return {wrap(reduce(l, red)), wrap(it)};
}
Tensor multilabel_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                           int64_t red, const Tensor&) {
  Multilabel m = multilabel_terms(self, target);
  LT mask = m.valid.unsqueeze(2).mul(m.is_target.neg().add(1.0).unsqueeze(1));
  LT act = m.term.gt(0.0).to(m.x.dtype()).mul(mask).div(static_cast<double>(m.x.size(1)));
  LT g = act.sum({1}).scatter_add(1, m.tsafe, act.sum({2}).neg());
  LT go = lz(grad);
  if (red == 0) go = go.reshape({m.x.size(0), 1});
  if (red == 1) go = go.div(static_cast<double>(m.x.size(0)));
  return wrap(g.mul(go).reshape(to_shape(self.sizes())));
}

// embedding_bag. offset2bag[i] = (offsets <= i).sum() - 1; padding rows count for nothing.
struct Bag {
  LT idx, o2b, valid;
  int64_t B;
};
Bag bag_of(const Tensor& indices, const Tensor& offsets, bool include_last, int64_t padding_idx) {
  Bag b;
  b.idx = lz(indices).reshape({indices.numel()}).to(lazyx::kInt64);
  const int64_t N = indices.numel();
  b.B = offsets.numel() - (include_last ? 1 : 0);
  LT offs = lz(offsets).to(lazyx::kInt64).narrow(0, 0, b.B);
  LT pos = lazyx::arange(0, N, 1, lazyx::kInt64).unsqueeze(1);
  b.o2b = offs.unsqueeze(0).le(pos).to(lazyx::kInt64).sum({1}).sub(li(1));
  if (include_last && N > 0) {  // elements at or after the last offset belong to no bag
    b.o2b = b.o2b.clamp(std::nullopt, li(b.B - 1));
  }
  b.valid = padding_idx >= 0 ? b.idx.ne(li(padding_idx)) : lazyx::full({N}, true, lazyx::kBool);
  return b;
}
std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag(
    const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool, int64_t mode, bool,
    const optional<Tensor>& psw, bool include_last, int64_t padding_idx) {
  LT w = lz(weight);
  const int64_t D = weight.size(1);
  Bag b = bag_of(indices, offsets, include_last, padding_idx);
  LT rows = w.index_select(0, b.idx);
  LT vf = b.valid.to(w.dtype()).unsqueeze(1);
  LT bag_size = lazyx::zeros({b.B}, lazyx::kInt64).scatter_add(0, b.o2b, b.valid.to(lazyx::kInt64));
  if (mode == 2) {  // max: a [B, N, D] mask of each bag's rows
    LT in_bag = lazyx::arange(0, b.B, 1, lazyx::kInt64).unsqueeze(1).eq(b.o2b.unsqueeze(0))
                    .logical_and(b.valid.unsqueeze(0)).unsqueeze(2);
    LT cand = lazyx::where(in_bag, rows.unsqueeze(0), lazyx::full({}, -INFINITY, w.dtype()));
    LT arg = cand.argmax(1);  // [B, D]
    LT empty = bag_size.eq(li(0)).unsqueeze(1);
    LT out = lazyx::where(empty, lazyx::zeros({}, w.dtype()), cand.amax({1}));
    LT maxi = lazyx::where(empty, lazyx::zeros({}, lazyx::kInt64),
                           b.idx.index_select(0, arg.reshape({b.B * D})).reshape({b.B, D}));
    return {wrap(out), wrap(b.o2b), wrap(bag_size), wrap(maxi)};
  }
  // Sums of 16-bit rows accumulate in float32 and round once, as eager's do.
  const bool half = w.dtype() == lazyx::kFloat16 || w.dtype() == lazyx::kBFloat16;
  const lazyx::Dtype acc = half ? lazyx::kFloat32 : w.dtype();
  LT r = rows.to(acc).mul(vf.to(acc));
  if (has(psw)) r = r.mul(lz(*psw).to(acc).unsqueeze(1));
  LT out = lazyx::zeros({b.B, D}, acc);
  out.index_put_({b.o2b}, r, true);
  if (mode == 1) out = out.div(bag_size.clamp(li(1), std::nullopt).to(acc).unsqueeze(1));
  return {wrap(out.to(w.dtype())), wrap(b.o2b), wrap(bag_size), wrap(bag_size.clone())};
}
Tensor embedding_bag_backward(const Tensor& grad, const Tensor& indices, const Tensor& offset2bag,
                              const Tensor& bag_size, const Tensor& max_indices,
                              int64_t num_weights, bool scale_grad, int64_t mode,
                              const optional<Tensor>& psw, int64_t padding_idx) {
  LT g = lz(grad);
  const int64_t D = grad.size(1);
  LT idx = lz(indices).reshape({indices.numel()}).to(lazyx::kInt64);
  LT gw = lazyx::zeros({num_weights, D}, g.dtype());
  if (mode == 2) {
    LT mi = lz(max_indices);
    LT keep = lz(bag_size).gt(li(0)).unsqueeze(1).to(g.dtype());
    gw.index_put_({mi, lazyx::arange(0, D, 1, lazyx::kInt64).unsqueeze(0)}, g.mul(keep), true);
    return wrap(gw);
  }
  TORCH_CHECK(offset2bag.numel() == indices.numel(), "[embedding_bag] offset2bag must come from "
              "the lazyx forward (one entry per index).");
  LT o2b = lz(offset2bag);
  LT rows = g.index_select(0, o2b);
  if (mode == 1) {
    rows = rows.div(lz(bag_size).index_select(0, o2b).clamp(li(1), std::nullopt).to(g.dtype())
                        .unsqueeze(1));
  }
  if (has(psw)) rows = rows.mul(lz(*psw).unsqueeze(1));
  if (padding_idx >= 0) rows = rows.mul(idx.ne(li(padding_idx)).to(g.dtype()).unsqueeze(1));
  if (scale_grad) {
    LT freq = lazyx::zeros({num_weights}, g.dtype()).scatter_add(0, idx, lazyx::ones({indices.numel()}, g.dtype()));
    rows = rows.div(freq.index_select(0, idx).unsqueeze(1));
  }
  gw.index_put_({idx}, rows, true);
  return wrap(gw);
}
// torch 2.x's entry point for embedding_bag's weight gradient: the dense one above.
Tensor embedding_bag_backward_any(const Tensor& grad, const Tensor& indices, const Tensor&,
                                  const Tensor& offset2bag, const Tensor& bag_size,
                                  const Tensor& max_indices, c10::SymInt num_weights,
                                  bool scale_grad, int64_t mode, bool sparse,
                                  const optional<Tensor>& psw, int64_t padding_idx) {
  TORCH_CHECK(!sparse, "[embedding_bag] sparse=True gives a sparse gradient, and sparse layouts "
              "are not supported on the lazyx device; use sparse=False.");
  return embedding_bag_backward(grad, indices, offset2bag, bag_size, max_indices,
                                num_weights.expect_int(), scale_grad, mode, psw, padding_idx);
}
Tensor embedding_bag_psw_backward(const Tensor& grad, const Tensor& weight, const Tensor& indices,
                                  const Tensor&, const Tensor& offset2bag, int64_t mode,
                                  int64_t padding_idx) {
  TORCH_CHECK(mode == 0, "[embedding_bag] per_sample_weights need mode='sum'.");
  LT idx = lz(indices).reshape({indices.numel()}).to(lazyx::kInt64);
  LT r = lz(grad).index_select(0, lz(offset2bag)).mul(lz(weight).index_select(0, idx)).sum({1});
  if (padding_idx >= 0) r = r.mul(idx.ne(li(padding_idx)).to(r.dtype()));
  return wrap(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "binary_cross_entropy", LZ_FN(bce));
  impl(m, "binary_cross_entropy_backward", LZ_FN(bce_backward));
  impl(m, "smooth_l1_loss", LZ_FN(smooth_l1));
  impl(m, "smooth_l1_loss_backward.grad_input", LZ_FN(smooth_l1_backward));
  impl(m, "huber_loss", LZ_FN(huber));
  impl(m, "huber_loss_backward.out", LZ_FN(huber_backward));
  impl(m, "nll_loss2d_forward", LZ_FN(nll2d));
  impl(m, "nll_loss2d_backward", LZ_FN(nll2d_backward));
  impl(m, "multi_margin_loss", LZ_FN(multi_margin));
  impl(m, "multi_margin_loss_backward", LZ_FN(multi_margin_backward));
  impl(m, "multilabel_margin_loss_forward", LZ_FN(multilabel_forward));
  impl(m, "multilabel_margin_loss_backward", LZ_FN(multilabel_backward));
  impl(m, "_embedding_bag", LZ_FN(embedding_bag));
  impl(m, "_embedding_bag_dense_backward", LZ_FN(embedding_bag_backward));
  impl(m, "_embedding_bag_backward", LZ_FN(embedding_bag_backward_any));
  impl(m, "_embedding_bag_per_sample_weights_backward", LZ_FN(embedding_bag_psw_backward));
}

}  // namespace lazyx_bridge
