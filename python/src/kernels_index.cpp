// Kernels: gathers, scatters, masked fills, embedding backward and cat (advanced indexing:
// kernels_index_adv.cpp).
// Patterns without a native lowering run on CPU and are counted like the fallback.
#include <ATen/ATen.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

// A 0-dim self (or index) takes part as a 1-D tensor of one element, as in eager; results get
// eager's shape back. v1 of a 0-dim device tensor is a view, so in-place ops through it write self.
using lazyx_bridge::v1;
LT v1(const Tensor& t) { return lazyx_bridge::v1(lz(t)); }

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  LT r = v1(self).index_select(wrap_dim(dim, self.dim()), v1(index));
  return wrap(self.dim() == 0 ? r.reshape({}) : r);
}
Tensor& index_copy_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  LT t = v1(self);
  t.index_copy_(wrap_dim(dim, self.dim()), v1(index), v1(source));
  return self;
}
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  LT r = v1(self).index_copy(wrap_dim(dim, self.dim()), v1(index), v1(source));
  return wrap(self.dim() == 0 ? r.reshape({}) : r);
}
// index_fill_ and index_add through index_copy_ and scatter_add (index_copy's and
// index_select's backward): the index is broadcast along the other dims of `dim`. index_fill_
// counts negative indices from the end, as eager does.
Tensor& index_fill_(Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value) {
  const int64_t d = wrap_dim(dim, self.dim());
  LT t = v1(self);
  Shape shape = t.shape();
  shape[d] = index.numel();
  LT i = lz(index).reshape({index.numel()});
  i = lazyx::where(i.lt(0), i.add(lazyx::Scalar(static_cast<long long>(t.shape()[d]))), i);
  t.index_copy_(d, i, lazyx::full(shape, to_lz(value), t.dtype()));
  return self;
}
LT index_add_value(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                   const c10::Scalar& alpha) {
  const int64_t d = wrap_dim(dim, self.dim());
  bool same = source.dim() == self.dim();
  for (int64_t k = 0; same && k < self.dim(); ++k) same = k == d || source.size(k) == self.size(k);
  TORCH_CHECK(same, "[index_add] source tensor shape must match self tensor shape, excluding the "
              "specified dimension. Got self.shape = ", self.sizes(), " source.shape = ",
              source.sizes());
  LT src = v1(source);
  if (alpha.toDouble() != 1.0) src = src * to_lz(alpha);
  Shape at(static_cast<size_t>(src.dim()), 1);
  at[d] = index.numel();
  LT idx = lz(index).reshape(at).expand(src.shape());
  LT r = v1(self).scatter_add(d, idx, src);
  return self.dim() == 0 ? r.reshape({}) : r;
}
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const c10::Scalar& alpha) {
  return wrap(index_add_value(self, dim, index, source, alpha));
}
Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                   const c10::Scalar& alpha) {
  LT t = lz(self);
  t.copy_(index_add_value(self, dim, index, source, alpha));
  return self;
}
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool) {
  if (index.numel() == 0) {  // eager takes an empty index of any dtype
    return wrap(lazyx::zeros(to_shape(index.sizes()), lz(self).dtype()));
  }
  LT r = v1(self).gather(wrap_dim(dim, self.dim()), v1(index));
  return wrap(index.dim() == 0 ? r.reshape({}) : r);
}
Tensor scatter_src(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT r = v1(self).scatter(wrap_dim(dim, self.dim()), v1(index), v1(src));
  return wrap(self.dim() == 0 ? r.reshape({}) : r);
}
Tensor& scatter__src(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT t = v1(self);
  t.scatter_(wrap_dim(dim, self.dim()), v1(index), v1(src));
  return self;
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT r = v1(self).scatter_add(wrap_dim(dim, self.dim()), v1(index), v1(src));
  return wrap(self.dim() == 0 ? r.reshape({}) : r);
}
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT t = v1(self);
  t.scatter_add_(wrap_dim(dim, self.dim()), v1(index), v1(src));
  return self;
}
// Out of place, a mask of more dims broadcasts the result, as in eager.
Tensor masked_fill_s(const Tensor& self, const Tensor& mask, const c10::Scalar& v) {
  LT x = lz(self);
  if (mask.sizes() != self.sizes()) {
    x = x.expand(to_shape(at::infer_size(self.sizes(), mask.sizes())));
  }
  return wrap(x.masked_fill(lz(mask), to_lz(v)));
}
Tensor& masked_fill__s(Tensor& self, const Tensor& mask, const c10::Scalar& v) {
  LT t = lz(self);
  t.masked_fill_(lz(mask), to_lz(v));
  return self;
}
Tensor& masked_fill__t(Tensor& self, const Tensor& mask, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "[masked_fill_] value must be a 0-dim tensor.");
  c10::Scalar s = is_cpu_scalar(v) ? to_at_scalar(cpu_scalar(v)) : v.item();
  return masked_fill__s(self, mask, s);
}

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, c10::SymInt num_weights,
                                c10::SymInt padding_sym, bool scale_grad_by_freq) {
  const int64_t padding_idx = padding_sym.expect_int();
  if (scale_grad_by_freq) {  // no native lowering: runs on CPU, counted like the fallback
    lazyx::metrics::add_counter("aten::embedding_dense_backward");
    return to_device(at::_ops::embedding_dense_backward::call(to_cpu(grad), to_cpu(indices),
                                                              num_weights, padding_sym, true));
  }
  LT idx = lz(indices).reshape({-1});
  const int64_t D = grad.size(-1);
  LT g = lz(grad).reshape({-1, D});
  if (padding_idx >= 0) g = g.mul(idx.ne(padding_idx).to(g.dtype()).unsqueeze(1));
  LT out = lazyx::zeros({num_weights.expect_int(), D}, g.dtype());
  out.index_put_({idx}, g, true);
  return wrap(out);
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<LT> ts;
  int64_t nd = -1;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // legacy empty tensors
    ts.push_back(lz(t));
    nd = t.dim();
  }
  TORCH_CHECK(tensors.size() > 0, "[cat] expected a non-empty list of tensors.");
  if (ts.empty()) {  // only legacy empty tensors: an empty result of the promoted dtype
    c10::ScalarType st = tensors.front().scalar_type();
    for (const Tensor& t : tensors) st = c10::promoteTypes(st, t.scalar_type());
    return wrap(lazyx::zeros({0}, to_lz(st)));
  }
  return wrap(lazyx::cat(ts, wrap_dim(dim, nd)));
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "index_select", LZ_FN(index_select));
  impl(m, "index_copy_", LZ_FN(index_copy_));
  impl(m, "index_copy", LZ_FN(index_copy));
  impl(m, "index_fill_.int_Scalar", LZ_FN(index_fill_));
  impl(m, "index_add", LZ_FN(index_add));
  impl(m, "index_add_", LZ_FN(index_add_));
  impl(m, "gather", LZ_FN(gather));
  impl(m, "scatter.src", LZ_FN(scatter_src));
  impl(m, "scatter_.src", LZ_FN(scatter__src));
  impl(m, "scatter_add", LZ_FN(scatter_add));
  impl(m, "scatter_add_", LZ_FN(scatter_add_));
  impl(m, "masked_fill.Scalar", LZ_FN(masked_fill_s));
  impl(m, "masked_fill_.Scalar", LZ_FN(masked_fill__s));
  impl(m, "masked_fill_.Tensor", LZ_FN(masked_fill__t));
  impl(m, "embedding_dense_backward", LZ_FN(embedding_dense_backward));
  impl(m, "cat", LZ_FN(cat));
}

}  // namespace

}  // namespace lazyx_bridge
