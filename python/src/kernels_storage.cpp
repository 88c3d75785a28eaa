// Kernels that change a tensor's storage or metadata in place, by PyTorch's rules: resize_
// (the storage keeps its data), set_ (alias another tensor or storage) and as_strided_, through
// which torch's own t_, transpose_, squeeze_ and unsqueeze_ run. The tensor's handle becomes a
// window onto its (possibly grown) storage, so views taken before stay views.
#include <ATen/ops/tensor_split_native.h>
#include <torch/library.h>

#include <vector>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

LzStorage* lz_storage(const c10::Storage& s) {
  return dynamic_cast<LzStorage*>(s.unsafeGetStorageImpl());
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// self becomes the `sizes`/`strides` window at `offset` of its storage.
void set_window(const Tensor& self, const Shape& sizes, const Shape& strides, int64_t offset) {
  LzTensorImpl* impl = lz_impl(self);
  LzStorage* st = lz_storage(impl->storage());
  TORCH_CHECK(st != nullptr, "[as_strided_] the tensor has no lazyx storage.");
  if (offset == 0 && sizes == st->root.sizes() && strides == contiguous_strides(sizes)) {
    impl->set_tensor(st->root, impl->storage());  // the whole storage: the base itself
  } else {
    impl->set_tensor(st->root.as_strided(sizes, strides, offset), impl->storage());
  }
}

}  // namespace

void resize_impl(const Tensor& self, c10::IntArrayRef size) {
  LzTensorImpl* impl = lz_impl(self);
  if (self.sizes() == size) return;
  for (int64_t d : size) {
    TORCH_CHECK(d >= 0, "[resize_] sizes must be non-negative, got ", size, ".");
  }
  const Shape s = to_shape(size);
  const int64_t n = numel_of(s), off = self.storage_offset();
  LzStorage* st = lz_storage(impl->storage());
  TORCH_CHECK(st != nullptr, "[resize_] the tensor has no lazyx storage.");
  const int64_t cap = st->root.numel();
  if (off + n <= cap) {  // the storage is large enough: keep it (and every view of it)
    set_window(self, s, contiguous_strides(s), off);
    return;
  }
  const lazyx::Dtype dt = impl->tensor().dtype();
  if (cap == 0 && off == 0) {  // nothing to keep: a fresh tensor (out= may take the result)
    LT z = lazyx::zeros(s, dt);
    impl->set_tensor(z, c10::Storage(c10::make_intrusive<LzStorage>(z)));
    impl->set_fresh(true);
    return;
  }
  // Grow: the old elements first, then new ones (zeros; PyTorch leaves them uninitialized).
  LT grown = lazyx::cat({st->root.reshape({cap}), lazyx::zeros({off + n - cap}, dt)});
  impl->set_tensor(grown, c10::Storage(c10::make_intrusive<LzStorage>(grown)));
  set_window(self, s, contiguous_strides(s), off);
}

void resize_output(const Tensor& out, c10::IntArrayRef size) {
  if (out.sizes() == size) return;
  if (out.numel() != 0) {
    TORCH_WARN("An output with one or more elements was resized since it had shape ", out.sizes(),
               ", which does not match the required output shape ", size, ".");
  }
  resize_impl(out, size);
}

Tensor& write_out(Tensor& out, LT r) {
  TORCH_CHECK(is_lazyx(out),
              "Expected all tensors to be on the same device, but found at least "
              "two devices, lazy:0 and ",
              out.device(), "! (out= tensor)");
  TORCH_CHECK(to_at(r.dtype()) == out.scalar_type(), "Expected out tensor to have dtype ",
              to_at(r.dtype()), ", but got ", out.scalar_type(), " instead");
  resize_output(out, c10::IntArrayRef(r.sizes().data(), r.sizes().size()));
  return assign(out, r, true);
}

namespace {

const Tensor& resize_(const Tensor& self, c10::SymIntArrayRef size, optional<c10::MemoryFormat>) {
  resize_impl(self, C10_AS_INTARRAYREF_SLOW(size));
  return self;
}

const Tensor& as_strided_(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                          optional<c10::SymInt> offset) {
  const int64_t off = offset.has_value() ? offset->expect_int() : self.storage_offset();
  set_window(self, to_shape(size), to_shape(stride), off);
  return self;
}

Tensor& set_tensor(Tensor& self, const Tensor& src) {
  TORCH_CHECK(is_lazyx(src), "[set_] the source must be a lazyx device tensor, got one on ",
              src.device(), ".");
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), "[set_] cannot set a ", self.scalar_type(),
              " tensor to a ", src.scalar_type(), " tensor; convert the source first.");
  lz_impl(self)->set_tensor(lz(src), lz_impl(src)->storage());
  return self;
}

Tensor& set_empty(Tensor& self) {
  LT z = lazyx::zeros({0}, lz_impl(self)->tensor().dtype());
  lz_impl(self)->set_tensor(z, c10::Storage(c10::make_intrusive<LzStorage>(z)));
  return self;
}

Tensor& set_storage_offset(Tensor& self, c10::Storage source, c10::SymInt offset,
                           c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  LzStorage* st = lz_storage(source);
  TORCH_CHECK(st != nullptr,
              "[set_] the storage is not a lazyx storage; use a tensor on the "
              "lazyx device as the source.");
  TORCH_CHECK(st->root.dtype() == lz_impl(self)->tensor().dtype(),
              "[set_] the storage holds another dtype; convert the tensor first.");
  LT h = st->root.as_strided(to_shape(size), to_shape(stride), offset.expect_int());
  lz_impl(self)->set_tensor(h, source);
  return self;
}

Tensor& set_storage(Tensor& self, c10::Storage source) {
  LzStorage* st = lz_storage(source);
  TORCH_CHECK(st != nullptr,
              "[set_] the storage is not a lazyx storage; use a tensor on the "
              "lazyx device as the source.");
  const std::vector<c10::SymInt> size = {c10::SymInt(st->root.numel())}, stride = {c10::SymInt(1)};
  return set_storage_offset(self, source, c10::SymInt(0), size, stride);
}

// tensor_split with the split points in a device tensor: torch's composite kernel insists on a
// CPU tensor, so the points are read first (they decide the result's shapes).
std::vector<Tensor> tensor_split_t(const Tensor& self, const Tensor& ind, int64_t dim) {
  return at::native::tensor_split(self, to_cpu(ind), dim);
}

TORCH_LIBRARY_IMPL(aten, AutogradLazy, m) {
  impl(m, "tensor_split.tensor_indices_or_sections", TORCH_FN(tensor_split_t));
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "resize_", LZ_FN(resize_));
  impl(m, "as_strided_", LZ_FN(as_strided_));
  impl(m, "set_.source_Tensor", LZ_FN(set_tensor));
  impl(m, "set_", LZ_FN(set_empty));
  impl(m, "set_.source_Storage", LZ_FN(set_storage));
  impl(m, "set_.source_Storage_storage_offset", LZ_FN(set_storage_offset));
}

}  // namespace

}  // namespace lazyx_bridge
