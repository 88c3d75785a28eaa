// Kernels: views. Each is a real view over the same lazyx storage (wrap_view), so in-place
// writes through it update the base.
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

Tensor view(const Tensor& self, c10::SymIntArrayRef size) {
  return wrap_view(lz(self).view(to_shape(size)), self);
}
Tensor _reshape_alias(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef) {
  return wrap_view(lz(self).view(to_shape(size)), self);
}
Tensor _unsafe_view(const Tensor& self, c10::SymIntArrayRef size) {
  LT r = lz(self).reshape(to_shape(size));
  return r.is_view() ? wrap_view(r, self) : wrap(r);
}
Tensor alias(const Tensor& self) { return wrap_view(lz(self).view(lz(self).sizes()), self); }
// view(dtype): the bytes seen as another dtype. lazyx has no bitcast; refuse at the view itself
// (torch's composite would make a tensor no later op can use).
Tensor view_dtype(const Tensor& self, c10::ScalarType dtype) {
  if (dtype == self.scalar_type()) return wrap_view(lz(self).view(lz(self).sizes()), self);
  TORCH_CHECK(false, "[view.dtype] viewing a ", self.scalar_type(), " tensor's bytes as ", dtype,
              " is not supported on the lazyx device; convert the values with .to(", dtype,
              ") or view a CPU copy (.cpu().view(", dtype, ")).");
}
Tensor as_strided_k(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                    optional<c10::SymInt> offset) {
  int64_t off = offset.has_value() ? offset->expect_int() : self.storage_offset();
  return wrap_view(
      as_strided(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), off), self);
}
Tensor transpose(const Tensor& self, int64_t d0, int64_t d1) {
  return wrap_view(lz(self).transpose(d0, d1), self);
}
Tensor permute(const Tensor& self, c10::IntArrayRef dims) {
  return wrap_view(lz(self).permute(to_dims(dims)), self);
}
Tensor expand(const Tensor& self, c10::SymIntArrayRef size, bool) {
  Shape s = to_shape(size);
  const int64_t lead = static_cast<int64_t>(s.size()) - self.dim();
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (s[i] == -1) {
      TORCH_CHECK(i >= lead, "[expand] -1 is not allowed in a leading, non-existing dimension.");
      s[i] = self.size(i - lead);
    }
  }
  return wrap_view(lz(self).expand(s), self);
}
Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  dim = wrap_dim(dim, self.dim());
  int64_t n = self.size(dim);
  TORCH_CHECK(index >= -n && index < n, "[select] index ", index,
              " is out of bounds for dimension ", dim, " with size ", n);
  if (index < 0) index += n;
  return wrap_view(lz(self).select(dim, index), self);
}
Tensor slice(const Tensor& self, int64_t dim, optional<c10::SymInt> start,
             optional<c10::SymInt> end, c10::SymInt step) {
  dim = wrap_dim(dim, self.dim());
  int64_t n = self.size(dim);
  int64_t s = start.has_value() ? start->expect_int() : 0;
  int64_t e = end.has_value() ? end->expect_int() : n;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  return wrap_view(lz(self).slice(dim, s, e, step.expect_int()), self);
}
Tensor unsqueeze(const Tensor& self, int64_t dim) {
  return wrap_view(lz(self).unsqueeze(wrap_dim(dim, self.dim() + 1)), self);
}
// unfold(dim, size, step): windows of `size` elements every `step` along dim, as a new last dim;
// a real view (repeat and tile write their result through it).
Tensor unfold(const Tensor& self, int64_t dim, int64_t size, int64_t step) {
  const int64_t nd = self.dim();
  dim = wrap_dim(dim, nd);
  const int64_t n = nd == 0 ? 1 : self.size(dim);
  TORCH_CHECK(size >= 0 && size <= n, "[unfold] size ", size, " does not fit dimension ", dim,
              " of size ", n, "; use a size from 0 to ", n, ".");
  TORCH_CHECK(step > 0, "[unfold] step is ", step, "; use a step of at least 1.");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> strides(self.strides().begin(), self.strides().end());
  if (nd == 0) {
    sizes = {size};
    strides = {1};
  } else {
    sizes[dim] = (n - size) / step + 1;
    strides[dim] *= step;
    sizes.push_back(size);
    strides.push_back(self.stride(dim));
  }
  return wrap_view(as_strided(self, sizes, strides, self.storage_offset()), self);
}
Tensor squeeze(const Tensor& self) { return wrap_view(lz(self).squeeze(), self); }
Tensor squeeze_dim(const Tensor& self, int64_t dim) {
  if (self.dim() == 0) return wrap_view(lz(self).view({}), self);
  return wrap_view(lz(self).squeeze(wrap_dim(dim, self.dim())), self);
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "view", LZ_FN(view));
  impl(m, "_reshape_alias", LZ_FN(_reshape_alias));
  impl(m, "_unsafe_view", LZ_FN(_unsafe_view));
  impl(m, "alias", LZ_FN(alias));
  impl(m, "view.dtype", LZ_FN(view_dtype));
  impl(m, "as_strided", LZ_FN(as_strided_k));
  impl(m, "transpose.int", LZ_FN(transpose));
  impl(m, "permute", LZ_FN(permute));
  impl(m, "expand", LZ_FN(expand));
  impl(m, "select.int", LZ_FN(select));
  impl(m, "slice.Tensor", LZ_FN(slice));
  impl(m, "unsqueeze", LZ_FN(unsqueeze));
  impl(m, "unfold", LZ_FN(unfold));
  impl(m, "squeeze", LZ_FN(squeeze));
  impl(m, "squeeze.dim", LZ_FN(squeeze_dim));
}

}  // namespace

}  // namespace lazyx_bridge
