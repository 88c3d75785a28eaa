// Tensor metadata and value reads.
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "backends/reference/kernels.h"
#include "graph/executor.h"
#include "ir/shape_infer.h"
#include "lazyx/diagnostics.h"
#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

int64_t Tensor::id() const { return impl_of("id", *this).id(); }
const Shape& Tensor::shape() const { return impl_of("shape", *this).sizes(); }
const Shape& Tensor::strides() const {
  EngineLock lock(engine_mutex());  // a base computes its strides on first use
  return impl_of("strides", *this).strides();
}
int64_t Tensor::storage_offset() const { return impl_of("storage_offset", *this).offset(); }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::numel() const { return ir::shape_numel(shape()); }
Dtype Tensor::dtype() const { return impl_of("dtype", *this).dtype(); }
bool Tensor::is_view() const { return impl_of("is_view", *this).is_view(); }
bool Tensor::is_contiguous() const {
  EngineLock lock(engine_mutex());  // may compute a base's strides
  return impl_of("is_contiguous", *this).is_contiguous();
}
bool Tensor::is_pending() const {
  EngineLock lock(engine_mutex());
  return impl_of("is_pending", *this).storage()->pending();
}

int64_t Tensor::size(int64_t dim) const {
  const Shape& s = shape();
  return s[ir::wrap_dim("size", dim, static_cast<int64_t>(s.size()))];
}

namespace {

// The tensor's elements in row-major order, as doubles or int64s, after a partial sync.
template <typename T>
std::vector<T> read_values(const char* op, const Tensor& t) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of(op, t);
  Storage* st = i.storage().get();
  st->check_not_donated(op);
  if (st->pending()) graph::sync_storages(graph::SyncKind::Read, {st}, op);
  ProfileSpan span("to_host", "transfer", op);
  reference::Val v{static_cast<char*>(st->data()->data()), st->dtype(), st->shape()};
  int64_t n = ir::shape_numel(i.sizes());
  std::vector<T> out(n);
  i.for_each_offset([&](int64_t k, int64_t off) {
    if constexpr (std::is_floating_point_v<T>) {
      out[k] = static_cast<T>(reference::get_f(v, off));
    } else if constexpr (std::is_same_v<T, bool>) {
      out[k] = reference::get_f(v, off) != 0;
    } else {
      out[k] = static_cast<T>(reference::get_i(v, off));
    }
  });
  return out;
}

}  // namespace

template <typename T>
T Tensor::item() const {
  EngineLock lock(engine_mutex());
  if (numel() != 1) {
    ir::fail("item", "a tensor with " + std::to_string(numel()) + " elements " +
                         ir::shape_str(shape()) +
                         " cannot be converted to a scalar; only one element can.");
  }
  return read_values<T>("item", *this)[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  return read_values<T>("to_vector", *this);
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

void Tensor::copy_to_host(void* dst) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("copy_to_host", *this);
  Storage* st = i.storage().get();
  st->check_not_donated("copy_to_host");
  if (st->pending()) graph::sync_storages(graph::SyncKind::Read, {st}, "copy_to_host");
  ProfileSpan span("to_host", "transfer");
  size_t es = dtype_size(st->dtype());
  const char* src = static_cast<const char*>(st->data()->data());
  int64_t n = ir::shape_numel(i.sizes());
  if (i.is_identity()) {
    std::memcpy(dst, src, n * es);
    return;
  }
  char* out = static_cast<char*>(dst);
  i.for_each_offset([&](int64_t k, int64_t off) { std::memcpy(out + k * es, src + off * es, es); });
}

std::string Tensor::to_string() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  bool fl = is_floating(t.dtype());
  std::vector<double> v = read_values<double>("print", t);
  const Shape& s = t.shape();
  os << "tensor(";
  // Nested brackets, row-major; long tensors are elided after 1000 elements.
  size_t n = v.size();
  Shape idx(s.size(), 0);
  for (size_t d = 0; d < s.size(); ++d) os << "[";
  for (size_t k = 0; k < n && k < 1000; ++k) {
    if (fl) {
      os << std::setprecision(6) << v[k];
    } else if (t.dtype() == kBool) {
      os << (v[k] != 0 ? "True" : "False");
    } else {
      os << static_cast<int64_t>(v[k]);
    }
    size_t closed = 0;
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
      closed++;
    }
    for (size_t c = 0; c < closed; ++c) os << "]";
    if (k + 1 < n) os << (closed ? ",\n       " : ", ");
  }
  if (n > 1000) os << "...";
  if (n == 0) for (size_t d = 0; d < s.size(); ++d) os << "]";
  os << ", shape=" << ir::shape_str(s) << ", dtype=" << dtype_name(t.dtype()) << ")";
  return os;
}

}  // namespace lazyx
