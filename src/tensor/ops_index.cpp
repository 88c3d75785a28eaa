// Data movement and indexing: clone, copy_, fill_, cat, stack, gather/scatter, index_*.
#include <cstring>

#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

// Index values known at trace time (materialized and small), so bad ones fail at the call.
std::optional<std::vector<int64_t>> known_indices(const TensorImpl& t) {
  const auto& st = t.storage();
  if (st->pending() || !st->data() || st->donated()) return std::nullopt;
  int64_t n = ir::shape_numel(t.sizes());
  if (n > (1 << 16)) return std::nullopt;
  std::vector<int64_t> out(n);
  const char* base = static_cast<const char*>(st->data()->data());
  t.for_each_offset([&](int64_t k, int64_t off) {
    if (t.dtype() == kInt64) {
      std::memcpy(&out[k], base + off * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, base + off * 4, 4);
      out[k] = v;
    }
  });
  return out;
}

const TensorImpl& index_arg(const char* op, const Tensor& index, int64_t size,
                            bool allow_negative = false) {
  const TensorImpl& ii = impl_of(op, index);
  if (!is_integral(ii.dtype())) {
    ir::fail(op,
             std::string("index must be an integer tensor, got ") + dtype_name(ii.dtype()) + ".");
  }
  if (auto vals = known_indices(ii)) {
    for (int64_t v : *vals) {
      if (v < (allow_negative ? -size : 0) || v >= size) {
        ir::fail(op, "index " + std::to_string(v) + " is out of range for a dimension of size " +
                         std::to_string(size) + ".");
      }
    }
  }
  return ii;
}

ir::NodePtr index_select_node(const char* op, const TensorImpl& self, int64_t dim,
                              const Tensor& index) {
  int64_t rank = self.sizes().size();
  int64_t d = ir::wrap_dim(op, dim, rank);
  int64_t size = rank ? self.sizes()[d] : 1;
  const TensorImpl& ii = index_arg(op, index, size);
  if (ii.sizes().size() > 1) ir::fail(op, "index must be 0-D or 1-D, got " + ir::shape_str(ii.sizes()) + ".");
  Shape out = self.sizes();
  if (rank) out[d] = ir::shape_numel(ii.sizes());
  ir::Attrs a;
  a.i0 = d;
  return ir::make_node(Op::IndexSelect, self.dtype(), out,
                       {self.value(op), reshape_node(ii.value(op), {ir::shape_numel(ii.sizes())})}, a);
}

ir::NodePtr scatter_node(Op kind, const char* op, const TensorImpl& self, int64_t dim,
                         const Tensor& index, const Tensor& src) {
  int64_t rank = self.sizes().size();
  int64_t d = ir::wrap_dim(op, dim, rank);
  const TensorImpl& ii = index_arg(op, index, rank ? self.sizes()[d] : 1);
  const TensorImpl& si = impl_of(op, src);
  // PyTorch checks no shapes for an empty index, and the scatter writes nothing.
  if (ir::shape_numel(ii.sizes()) == 0) return self.value(op);
  check_scatter_shapes(op, self.sizes(), ii.sizes(), si.sizes(), d);
  ir::Attrs a;
  a.i0 = d;
  return ir::make_node(kind, self.dtype(), self.sizes(),
                       {self.value(op), ii.value(op), cast(si.value(op), self.dtype())}, a);
}

ir::NodePtr index_copy_node(const char* op, const TensorImpl& self, int64_t dim,
                            const Tensor& index, const Tensor& source) {
  int64_t rank = self.sizes().size();
  int64_t d = ir::wrap_dim(op, dim, rank);
  const TensorImpl& ii = index_arg(op, index, rank ? self.sizes()[d] : 1);
  const TensorImpl& si = impl_of(op, source);
  if (ii.sizes().size() > 1) ir::fail(op, "index must be 0-D or 1-D, got " + ir::shape_str(ii.sizes()) + ".");
  Shape expect = self.sizes();
  if (rank) expect[d] = ir::shape_numel(ii.sizes());
  if (si.sizes() != expect) {
    ir::fail(op, "source " + ir::shape_str(si.sizes()) + " must have shape " +
                     ir::shape_str(expect) + " (self " + ir::shape_str(self.sizes()) +
                     " with dimension " + std::to_string(d) + " replaced by the index length).");
  }
  if (si.dtype() != self.dtype()) {
    ir::fail(op, std::string("source dtype ") + dtype_name(si.dtype()) +
                     " does not match self dtype " + dtype_name(self.dtype()) + ".");
  }
  ir::Attrs a;
  a.i0 = d;
  return ir::make_node(Op::IndexCopy, self.dtype(), self.sizes(),
                       {self.value(op), reshape_node(ii.value(op), {ir::shape_numel(ii.sizes())}),
                        si.value(op)},
                       a);
}

}  // namespace

void detail::check_scatter_shapes(const char* op, const Shape& self, const Shape& index,
                                  const Shape& src, int64_t d) {
  const size_t rank = self.size();
  if (index.size() != rank || src.size() != rank) {
    ir::fail(op, "index " + ir::shape_str(index) + ", src " + ir::shape_str(src) + " and self " +
                     ir::shape_str(self) + " must have the same rank.");
  }
  for (size_t k = 0; k < rank; ++k) {
    if (index[k] > src[k] || (static_cast<int64_t>(k) != d && index[k] > self[k])) {
      ir::fail(op, "index " + ir::shape_str(index) + " is larger than src " + ir::shape_str(src) +
                       " or self " + ir::shape_str(self) + " in dimension " + std::to_string(k) +
                       ".");
    }
  }
}

Tensor Tensor::clone() const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("clone", *this);
  const auto& st = i.storage();
  st->check_not_donated("clone");
  // A materialized base shares its buffer copy-on-write: holders count both, so neither is
  // donated while the other still needs the value.
  if (i.is_identity() && !st->pending()) return make_tensor(st->data(), st->shape(), st->dtype());
  return make_tensor(i.value("clone"));
}

Tensor& Tensor::copy_(const Tensor& src) {
  EngineLock lock(engine_mutex());
  const TensorImpl& self = impl_of("copy_", *this);
  const TensorImpl& s = impl_of("copy_", src);
  Shape b = ir::broadcast_shapes("copy_", self.sizes(), s.sizes());
  if (b != self.sizes()) {
    ir::fail("copy_", "source " + ir::shape_str(s.sizes()) + " cannot be broadcast to " +
                          ir::shape_str(self.sizes()) + ".");
  }
  self.storage()->check_not_donated("copy_");
  impl()->assign("copy_", expand_node(s.value("copy_"), self.sizes(), self.dtype()));
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  EngineLock lock(engine_mutex());
  const TensorImpl& self = impl_of("fill_", *this);
  if (value.is_floating() && !is_floating(self.dtype())) {
    // PyTorch truncates here; we follow it.
  }
  impl()->assign("fill_", ir::make_node(Op::Full, self.dtype(), self.sizes(),
                                        {scalar_node(value, self.dtype())}));
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  EngineLock lock(engine_mutex());
  return make_tensor(index_select_node("index_select", impl_of("index_select", *this), dim, index));
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& self = impl_of("gather", *this);
  int64_t rank = self.sizes().size();
  int64_t d = ir::wrap_dim("gather", dim, rank);
  const TensorImpl& ii = index_arg("gather", index, rank ? self.sizes()[d] : 1);
  if (static_cast<int64_t>(ii.sizes().size()) != rank) {
    ir::fail("gather", "index " + ir::shape_str(ii.sizes()) + " must have the same rank as " +
                           ir::shape_str(self.sizes()) + ".");
  }
  for (int64_t k = 0; k < rank; ++k) {
    if (k != d && ii.sizes()[k] > self.sizes()[k]) {
      ir::fail("gather", "index " + ir::shape_str(ii.sizes()) + " is larger than self " +
                             ir::shape_str(self.sizes()) + " in dimension " + std::to_string(k) + ".");
    }
  }
  ir::Attrs a;
  a.i0 = d;
  return make_tensor(ir::make_node(Op::Gather, self.dtype(), ii.sizes(),
                                   {self.value("gather"), ii.value("gather")}, a));
}

Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  EngineLock lock(engine_mutex());
  return make_tensor(scatter_node(Op::Scatter, "scatter", impl_of("scatter", *this), dim, index, src));
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  EngineLock lock(engine_mutex());
  return make_tensor(
      scatter_node(Op::ScatterAdd, "scatter_add", impl_of("scatter_add", *this), dim, index, src));
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  EngineLock lock(engine_mutex());
  impl()->assign("scatter_", scatter_node(Op::Scatter, "scatter_", impl_of("scatter_", *this), dim, index, src));
  return *this;
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  EngineLock lock(engine_mutex());
  impl()->assign("scatter_add_", scatter_node(Op::ScatterAdd, "scatter_add_",
                                              impl_of("scatter_add_", *this), dim, index, src));
  return *this;
}
Tensor Tensor::index_copy(int64_t dim, const Tensor& index, const Tensor& source) const {
  EngineLock lock(engine_mutex());
  return make_tensor(index_copy_node("index_copy", impl_of("index_copy", *this), dim, index, source));
}
Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& source) {
  EngineLock lock(engine_mutex());
  impl()->assign("index_copy_",
                 index_copy_node("index_copy_", impl_of("index_copy_", *this), dim, index, source));
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                           bool accumulate) {
  EngineLock lock(engine_mutex());
  const char* op = "index_put_";
  const TensorImpl& self = impl_of(op, *this);
  if (indices.empty() || indices.size() > self.sizes().size()) {
    ir::fail(op, "expected 1 to " + std::to_string(self.sizes().size()) +
                     " index tensors for a tensor of shape " + ir::shape_str(self.sizes()) +
                     ", got " + std::to_string(indices.size()) + ".");
  }
  std::vector<ir::NodePtr> ops{self.value(op), nullptr};
  Shape ishape;
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorImpl& ii = index_arg(op, indices[k], self.sizes()[k], true);
    ishape = k == 0 ? ii.sizes() : ir::broadcast_shapes(op, ishape, ii.sizes());
    ops.push_back(ii.value(op));
  }
  // The indexed region: the broadcast index shape, then the dims not indexed.
  Shape region = ishape;
  region.insert(region.end(), self.sizes().begin() + indices.size(), self.sizes().end());
  const TensorImpl& vi = impl_of(op, values);
  Shape vb = ir::broadcast_shapes(op, region, vi.sizes());
  if (vb != region) {
    ir::fail(op, "values " + ir::shape_str(vi.sizes()) + " cannot be broadcast to the indexed "
                 "region " + ir::shape_str(region) + ".");
  }
  ops[1] = expand_node(vi.value(op), region, self.dtype());
  for (size_t k = 2; k < ops.size(); ++k) ops[k] = expand_node(ops[k], ishape, kInt64);
  ir::Attrs a;
  a.flag = accumulate;
  impl()->assign(op, ir::make_node(Op::IndexPut, self.dtype(), self.sizes(), std::move(ops), a));
  return *this;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EngineLock lock(engine_mutex());
  if (tensors.empty()) ir::fail("cat", "expected a non-empty list of tensors.");
  const TensorImpl& first = impl_of("cat", tensors[0]);
  int64_t rank = first.sizes().size();
  if (rank == 0) ir::fail("cat", "zero-dimensional tensors cannot be concatenated. Use stack().");
  int64_t d = ir::wrap_dim("cat", dim, rank);
  Shape out = first.sizes();
  out[d] = 0;
  Dtype dt = first.dtype();
  std::vector<ir::NodePtr> ops;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorImpl& t = impl_of("cat", tensors[k]);
    if (static_cast<int64_t>(t.sizes().size()) != rank) {
      ir::fail("cat", "tensor " + std::to_string(k) + " has shape " + ir::shape_str(t.sizes()) +
                          " but tensor 0 has " + ir::shape_str(first.sizes()) + ": ranks differ.");
    }
    for (int64_t j = 0; j < rank; ++j) {
      if (j != d && t.sizes()[j] != first.sizes()[j]) {
        ir::fail("cat", "sizes must match except in dimension " + std::to_string(d) +
                            ": tensor " + std::to_string(k) + " has " + ir::shape_str(t.sizes()) +
                            ", tensor 0 has " + ir::shape_str(first.sizes()) + ".");
      }
    }
    out[d] += t.sizes()[d];
    dt = promote_types(dt, t.dtype());
    ops.push_back(t.value("cat"));
  }
  for (auto& n : ops) n = cast(n, dt);
  ir::Attrs a;
  a.i0 = d;
  return make_tensor(ir::make_node(Op::Cat, dt, out, std::move(ops), a));
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EngineLock lock(engine_mutex());
  if (tensors.empty()) ir::fail("stack", "expected a non-empty list of tensors.");
  int64_t rank = impl_of("stack", tensors[0]).sizes().size();
  int64_t d = ir::wrap_dim("stack", dim, rank + 1);
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    if (impl_of("stack", t).sizes() != tensors[0].shape()) {
      ir::fail("stack", "all tensors must have the same shape: " + ir::shape_str(t.shape()) +
                            " vs " + ir::shape_str(tensors[0].shape()) + ".");
    }
    parts.push_back(t.unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace lazyx
