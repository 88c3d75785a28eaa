// View ops: each computes new sizes, strides and offset over the same storage, as PyTorch does.
#include <algorithm>
#include <numeric>

#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using namespace detail;

namespace {

Tensor make_view(const TensorImpl& src, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(src.storage(), std::move(sizes), std::move(strides),
                                             offset));
}

Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) ir::fail(op, "only one dimension can be inferred (-1) in " + ir::shape_str(shape) + ".");
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      ir::fail(op, "invalid size " + std::to_string(out[i]) + " in " + ir::shape_str(shape) + ".");
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      ir::fail(op, "shape " + ir::shape_str(shape) + " is invalid for input of size " +
                       std::to_string(numel) + ".");
    }
    out[infer] = numel / known;
  }
  if (ir::shape_numel(out) != numel) {
    ir::fail(op, "shape " + ir::shape_str(shape) + " is invalid for input of size " +
                     std::to_string(numel) + ".");
  }
  return out;
}

// PyTorch's computeStride: strides for viewing (old sizes, strides) as `ns`, if possible.
std::optional<Shape> view_strides(const Shape& os, const Shape& ost, const Shape& ns) {
  int64_t numel = ir::shape_numel(os);
  if (numel <= 1 || os.empty()) return ir::contiguous_strides(ns);
  Shape nst(ns.size(), 0);
  int64_t view_d = static_cast<int64_t>(ns.size()) - 1;
  int64_t chunk_base = ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = static_cast<int64_t>(os.size()) - 1; td >= 0; --td) {
    tensor_numel *= os[td];
    if (td == 0 || (os[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || ns[view_d] == 1)) {
        nst[view_d] = view_numel * chunk_base;
        view_numel *= ns[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (td > 0) {
        chunk_base = ost[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return nst;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("view", *this);
  Shape ns = infer_size("view", shape, ir::shape_numel(i.sizes()));
  auto st = view_strides(i.sizes(), i.strides(), ns);
  if (!st) {
    ir::fail("view", "a tensor of size " + ir::shape_str(i.sizes()) + " with strides " +
                         ir::shape_str(i.strides()) + " cannot be viewed as " +
                         ir::shape_str(ns) + ". Use reshape() (it copies) instead.");
  }
  return make_view(i, ns, *st, i.offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("reshape", *this);
  Shape ns = infer_size("reshape", shape, ir::shape_numel(i.sizes()));
  if (auto st = view_strides(i.sizes(), i.strides(), ns)) return make_view(i, ns, *st, i.offset());
  return make_tensor(reshape_node(i.value("reshape"), ns));
}

Tensor Tensor::expand(const Shape& shape) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("expand", *this);
  const Shape& os = i.sizes();
  if (shape.size() < os.size()) {
    ir::fail("expand", "the target " + ir::shape_str(shape) + " has fewer dimensions than " +
                           ir::shape_str(os) + ".");
  }
  size_t lead = shape.size() - os.size();
  Shape ns(shape.size()), nst(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < lead) {
      if (shape[d] < 0) ir::fail("expand", "size -1 is not allowed in a new leading dimension.");
      ns[d] = shape[d];
      nst[d] = 0;
      continue;
    }
    int64_t o = os[d - lead], t = shape[d];
    if (t == -1 || t == o) {
      ns[d] = o;
      nst[d] = i.strides()[d - lead];
    } else if (o == 1) {
      ns[d] = t;
      nst[d] = 0;
    } else {
      ir::fail("expand", "cannot expand " + ir::shape_str(os) + " to " + ir::shape_str(shape) +
                             ": dimension " + std::to_string(d) + " has size " +
                             std::to_string(o) + ", which is not 1.");
    }
  }
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("permute", *this);
  int64_t rank = static_cast<int64_t>(i.sizes().size());
  if (static_cast<int64_t>(dims.size()) != rank) {
    ir::fail("permute", "expected " + std::to_string(rank) + " dims for a tensor of shape " +
                            ir::shape_str(i.sizes()) + ", got " + std::to_string(dims.size()) + ".");
  }
  Shape ns(rank), nst(rank);
  std::vector<bool> seen(rank, false);
  for (int64_t k = 0; k < rank; ++k) {
    int64_t d = ir::wrap_dim("permute", dims[k], rank);
    if (seen[d]) ir::fail("permute", "dimension " + std::to_string(d) + " repeats.");
    seen[d] = true;
    ns[k] = i.sizes()[d];
    nst[k] = i.strides()[d];
  }
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("transpose", *this);
  int64_t rank = static_cast<int64_t>(i.sizes().size());
  Shape ns = i.sizes(), nst = i.strides();
  if (rank == 0) return make_view(i, ns, nst, i.offset());
  int64_t a = ir::wrap_dim("transpose", d0, rank), b = ir::wrap_dim("transpose", d1, rank);
  std::swap(ns[a], ns[b]);
  std::swap(nst[a], nst[b]);
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::t() const {
  EngineLock lock(engine_mutex());
  int64_t rank = impl_of("t", *this).sizes().size();
  if (rank > 2) {
    ir::fail("t", "expects a tensor with at most 2 dimensions, got " + ir::shape_str(shape()) +
                      ". Use transpose(dim0, dim1).");
  }
  return rank < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::squeeze() const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("squeeze", *this);
  Shape ns, nst;
  for (size_t d = 0; d < i.sizes().size(); ++d) {
    if (i.sizes()[d] != 1) {
      ns.push_back(i.sizes()[d]);
      nst.push_back(i.strides()[d]);
    }
  }
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::squeeze(int64_t dim) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("squeeze", *this);
  Shape ns = i.sizes(), nst = i.strides();
  if (ns.empty()) return make_view(i, ns, nst, i.offset());
  int64_t d = ir::wrap_dim("squeeze", dim, ns.size());
  if (ns[d] == 1) {
    ns.erase(ns.begin() + d);
    nst.erase(nst.begin() + d);
  }
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("unsqueeze", *this);
  int64_t rank = static_cast<int64_t>(i.sizes().size());
  int64_t d = ir::wrap_dim("unsqueeze", dim, rank + 1);
  Shape ns = i.sizes(), nst = i.strides();
  int64_t st = d < rank ? ns[d] * nst[d] : 1;
  ns.insert(ns.begin() + d, 1);
  nst.insert(nst.begin() + d, st);
  return make_view(i, ns, nst, i.offset());
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("select", *this);
  if (i.sizes().empty()) ir::fail("select", "cannot select from a 0-d tensor.");
  int64_t d = ir::wrap_dim("select", dim, i.sizes().size());
  int64_t size = i.sizes()[d];
  if (index < -size || index >= size) {
    ir::fail("select", "index " + std::to_string(index) + " is out of range for dimension " +
                           std::to_string(d) + " with size " + std::to_string(size) + ".");
  }
  if (index < 0) index += size;
  Shape ns = i.sizes(), nst = i.strides();
  int64_t off = i.offset() + index * nst[d];
  ns.erase(ns.begin() + d);
  nst.erase(nst.begin() + d);
  return make_view(i, ns, nst, off);
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("slice", *this);
  if (i.sizes().empty()) ir::fail("slice", "cannot slice a 0-d tensor.");
  if (step <= 0) ir::fail("slice", "step must be positive, got " + std::to_string(step) + ".");
  int64_t d = ir::wrap_dim("slice", dim, i.sizes().size());
  int64_t size = i.sizes()[d];
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  Shape ns = i.sizes(), nst = i.strides();
  int64_t off = i.offset() + s * nst[d];
  ns[d] = (e - s + step - 1) / step;
  nst[d] *= step;
  return make_view(i, ns, nst, off);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("narrow", *this);
  if (i.sizes().empty()) ir::fail("narrow", "cannot narrow a 0-d tensor.");
  int64_t d = ir::wrap_dim("narrow", dim, i.sizes().size());
  int64_t size = i.sizes()[d];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size) {
    ir::fail("narrow", "start " + std::to_string(start) + " and length " +
                           std::to_string(length) + " exceed dimension " + std::to_string(d) +
                           " of size " + std::to_string(size) + ".");
  }
  return slice(d, start, start + length, 1);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("flatten", *this);
  int64_t rank = static_cast<int64_t>(i.sizes().size());
  if (rank == 0) return reshape({1});
  int64_t a = ir::wrap_dim("flatten", start_dim, rank), b = ir::wrap_dim("flatten", end_dim, rank);
  if (a > b) ir::fail("flatten", "start_dim must not come after end_dim.");
  Shape ns(i.sizes().begin(), i.sizes().begin() + a);
  int64_t p = 1;
  for (int64_t d = a; d <= b; ++d) p *= i.sizes()[d];
  ns.push_back(p);
  ns.insert(ns.end(), i.sizes().begin() + b + 1, i.sizes().end());
  return reshape(ns);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("as_strided", *this);
  if (sizes.size() != strides.size()) {
    ir::fail("as_strided", "sizes " + ir::shape_str(sizes) + " and strides " +
                               ir::shape_str(strides) + " must have the same length.");
  }
  int64_t last = storage_offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) {
      ir::fail("as_strided", "negative size or stride in " + ir::shape_str(sizes) + " / " +
                                 ir::shape_str(strides) + ".");
    }
    if (sizes[d] == 0) last = -1;
    if (last >= 0) last += (sizes[d] - 1) * strides[d];
  }
  int64_t numel = i.storage()->numel();
  if (storage_offset < 0 || last >= numel) {
    ir::fail("as_strided", "sizes " + ir::shape_str(sizes) + ", strides " +
                               ir::shape_str(strides) + " and offset " +
                               std::to_string(storage_offset) + " reach element " +
                               std::to_string(last) + " of a storage of " + std::to_string(numel) +
                               " elements.");
  }
  return make_view(i, sizes, strides, storage_offset);
}

int64_t Tensor::storage_id() const {
  EngineLock lock(engine_mutex());
  return impl_of("storage_id", *this).storage()->id();
}

Tensor Tensor::contiguous() const {
  EngineLock lock(engine_mutex());
  if (impl_of("contiguous", *this).is_contiguous()) return *this;
  return clone();
}

}  // namespace lazyx
