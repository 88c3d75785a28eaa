// Creation ops and the random number state.
#include <cmath>
#include <cstring>
#include <map>

#include "backends/backend.h"
#include "lazyx/diagnostics.h"
#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

struct RngState {
  uint64_t seed = 0x5eed;
  uint64_t offset = 0;
};
RngState& rng() {
  static RngState s;
  return s;
}

void check_shape(const char* op, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) ir::fail(op, "negative dimension " + std::to_string(d) + " in " + ir::shape_str(shape) + ".");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d && n > (int64_t{1} << 40) / d) {
      ir::fail(op, "shape " + ir::shape_str(shape) + " has too many elements (more than 2^40).");
    }
    n *= d;
  }
}

// Counter-based random ops take the seed and a fresh offset as run-time scalars.
Tensor random_op(Op op, const char* name, const Shape& shape, Dtype dtype,
                 std::vector<ir::NodePtr> extra = {}) {
  check_shape(name, shape);
  RngState& r = rng();
  std::vector<ir::NodePtr> ops{ir::Node::scalar(kInt64, 0, static_cast<int64_t>(r.seed)),
                               ir::Node::scalar(kInt64, 0, static_cast<int64_t>(r.offset))};
  for (auto& e : extra) ops.push_back(std::move(e));
  r.offset += static_cast<uint64_t>(ir::shape_numel(shape));
  return make_tensor(ir::make_node(op, dtype, shape, std::move(ops)));
}

template <typename T>
void convert_into(const std::vector<T>& v, Dtype d, char* out) {
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = v[i] ? 1 : 0;
    } else {
      T x = v[i];
      std::memcpy(out + i * sizeof(T), &x, sizeof(T));
    }
  }
  (void)d;
}

}  // namespace

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  EngineLock lock(engine_mutex());
  check_shape("tensor", shape);
  Dtype d = dtype_of<T>();
  if (ir::shape_numel(shape) != static_cast<int64_t>(values.size())) {
    ir::fail("tensor", std::to_string(values.size()) + " values do not fill shape " +
                           ir::shape_str(shape) + " (" + std::to_string(ir::shape_numel(shape)) +
                           " elements).");
  }
  backend::Backend& be = backend::active_backend("tensor");
  size_t bytes = values.size() * dtype_size(d);
  std::vector<char> host(bytes);
  convert_into(values, d, host.data());
  runtime::BufferPtr buf = be.allocate(bytes);
  be.upload(*buf, host.data(), bytes);
  return make_tensor(std::move(buf), shape, d);
}

template Tensor tensor<float>(const std::vector<float>&, const Shape&);
template Tensor tensor<double>(const std::vector<double>&, const Shape&);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&);

Tensor from_host(const void* data, const Shape& shape, Dtype dtype) {
  EngineLock lock(engine_mutex());
  check_shape("from_host", shape);
  backend::Backend& be = backend::active_backend("from_host");
  size_t bytes = static_cast<size_t>(ir::shape_numel(shape)) * dtype_size(dtype);
  ProfileSpan span("to_device", "transfer");
  runtime::BufferPtr buf = be.allocate(bytes);
  be.upload(*buf, data, bytes);
  return make_tensor(std::move(buf), shape, dtype);
}

Tensor full(const Shape& shape, Scalar value, std::optional<Dtype> dtype) {
  EngineLock lock(engine_mutex());
  check_shape("full", shape);
  Dtype d = dtype.value_or(value.default_dtype());
  return make_tensor(ir::make_node(Op::Full, d, shape, {scalar_node(value, d)}));
}
Tensor zeros(const Shape& shape, Dtype dtype) { return full(shape, 0, dtype); }
Tensor ones(const Shape& shape, Dtype dtype) { return full(shape, 1, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(impl_of("zeros_like", t).sizes(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(impl_of("ones_like", t).sizes(), t.dtype()); }

Tensor arange(Scalar end) { return arange(0, end, 1); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<Dtype> dtype) {
  EngineLock lock(engine_mutex());
  bool fl = start.is_floating() || end.is_floating() || step.is_floating();
  Dtype d = dtype.value_or(fl ? kFloat32 : kInt64);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) ir::fail("arange", "step must be nonzero.");
  if ((st > 0 && e < s) || (st < 0 && e > s)) {
    ir::fail("arange", "upper bound and step disagree in sign: start " + std::to_string(s) +
                           ", end " + std::to_string(e) + ", step " + std::to_string(st) + ".");
  }
  int64_t n = static_cast<int64_t>(std::ceil((e - s) / st));
  check_shape("arange", {n});
  Dtype sd = is_floating(d) ? kFloat64 : kInt64;  // exact start/step for every element
  return make_tensor(ir::make_node(Op::Arange, d, {n}, {scalar_node(start, sd), scalar_node(step, sd)}));
}

Tensor scalar_tensor(Scalar value, std::optional<Dtype> dtype) {
  EngineLock lock(engine_mutex());
  Dtype d = dtype.value_or(kFloat32);  // torch.scalar_tensor uses the default dtype
  // Keyed by dtype and the value's bits; the cache owns (pins) its buffers.
  static std::map<std::pair<int, uint64_t>, runtime::BufferPtr>* cache =
      new std::map<std::pair<int, uint64_t>, runtime::BufferPtr>();
  double f = value.to_double();
  int64_t i = value.is_floating() ? static_cast<int64_t>(f) : value.to_int();
  uint64_t bits;
  if (is_floating(d)) {
    std::memcpy(&bits, &f, 8);
  } else {
    bits = static_cast<uint64_t>(i);
  }
  auto key = std::make_pair(static_cast<int>(d), bits);
  auto it = cache->find(key);
  if (it == cache->end()) {
    backend::Backend& be = backend::active_backend("scalar_tensor");
    runtime::BufferPtr buf = be.allocate(dtype_size(d));
    char host[8] = {0};
    switch (d) {
      case kBool: host[0] = i != 0; break;
      case kUInt8: host[0] = static_cast<char>(static_cast<uint8_t>(i)); break;
      case kInt8: host[0] = static_cast<char>(static_cast<int8_t>(i)); break;
      case kInt16: { int16_t v = static_cast<int16_t>(i); std::memcpy(host, &v, 2); break; }
      case kInt32: { int32_t v = static_cast<int32_t>(i); std::memcpy(host, &v, 4); break; }
      case kInt64: std::memcpy(host, &i, 8); break;
      case kFloat16: { uint16_t v = float_to_half(static_cast<float>(f)); std::memcpy(host, &v, 2); break; }
      case kBFloat16: { uint16_t v = float_to_bf16(static_cast<float>(f)); std::memcpy(host, &v, 2); break; }
      case kFloat32: { float v = static_cast<float>(f); std::memcpy(host, &v, 4); break; }
      case kFloat64: std::memcpy(host, &f, 8); break;
    }
    be.upload(*buf, host, dtype_size(d));
    buf->set_pinned(true);
    it = cache->emplace(key, std::move(buf)).first;
  }
  return make_tensor(it->second, {}, d);
}

void manual_seed(uint64_t seed) {
  EngineLock lock(engine_mutex());
  rng().seed = seed;
  rng().offset = 0;
}

Tensor rand(const Shape& shape, Dtype dtype) {
  EngineLock lock(engine_mutex());
  check_dtype("rand", dtype, false, false, true);
  return random_op(Op::RandUniform, "rand", shape, dtype);
}

Tensor randn(const Shape& shape, Dtype dtype) {
  EngineLock lock(engine_mutex());
  check_dtype("randn", dtype, false, false, true);
  return random_op(Op::RandNormal, "randn", shape, dtype);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype) {
  EngineLock lock(engine_mutex());
  if (high <= low) {
    ir::fail("randint", "high (" + std::to_string(high) + ") must be greater than low (" +
                            std::to_string(low) + ").");
  }
  check_dtype("randint", dtype, false, true, true);
  return random_op(Op::RandInt, "randint", shape, dtype,
                   {ir::Node::scalar(kInt64, 0, low), ir::Node::scalar(kInt64, 0, high)});
}

}  // namespace lazyx
