// The device itself: the guard, the TensorImpl, dtype and scalar conversions, host transfers and
// as_strided over lazyx's public view ops.
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <mutex>
#include <typeinfo>

#include "kernels.h"
#include "diag_bridge.h"

namespace lazyx_bridge {

// ---------------------------------------------------------------------------------------------
// Device guard: one device, no streams.
namespace {
struct LzGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDeviceType; }
  c10::Device exchangeDevice(c10::Device) const override { return device(); }
  c10::Device getDevice() const override { return device(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
};
}  // namespace
C10_REGISTER_GUARD_IMPL(Lazy, LzGuardImpl);

// ---------------------------------------------------------------------------------------------
// Kernel registrations (kernels.h): kept in a function-local static, since they happen during
// static initialization of the other files.
namespace {
std::vector<Registration>& registration_list() {
  static std::vector<Registration> list;
  return list;
}
}  // namespace
void note_registration(const char* name, const std::string& error) {
  registration_list().push_back({name, error});
}
const std::vector<Registration>& registrations() { return registration_list(); }

// ---------------------------------------------------------------------------------------------
// Storage and TensorImpl.
// Its byte size is the root's (torch's composites read storage().nbytes(), e.g. to clone a view
// with its strides); its data pointer stays null: the values live in the engine.
LzStorage::LzStorage(lazyx::Tensor root_tensor)
    : c10::StorageImpl(c10::StorageImpl::use_byte_size_t(),
                       c10::SymInt(root_tensor.numel() *
                                   static_cast<int64_t>(lazyx::dtype_size(root_tensor.dtype()))),
                       c10::DataPtr(nullptr, lazyx_bridge::device()), nullptr, /*resizable=*/false),
      root(std::move(root_tensor)) {}

namespace {
c10::Storage make_storage(const lazyx::Tensor& root) {
  return c10::Storage(c10::make_intrusive<LzStorage>(root));
}
}  // namespace

LzTensorImpl::LzTensorImpl(lazyx::Tensor t, c10::Storage storage)
    : c10::TensorImpl(std::move(storage), c10::DispatchKeySet{c10::DispatchKey::Lazy},
                      c10::scalarTypeToTypeMeta(to_at(t.dtype()))),
      tensor_(std::move(t)) {
  refresh_meta();
}

void LzTensorImpl::refresh_meta() {
  const auto& sz = tensor_.sizes();
  sizes_and_strides_.set_sizes(c10::IntArrayRef(sz.data(), sz.size()));
  if (tensor_.is_view()) {
    const auto& st = tensor_.strides();
    for (size_t i = 0; i < st.size(); ++i) sizes_and_strides_.stride_at_unchecked(i) = st[i];
  } else {
    // A base is contiguous. Computing its strides here skips the engine lock and the strides
    // vector lazyx::Tensor::strides() builds on first use (every op result is a new base).
    int64_t acc = 1;
    for (size_t i = sz.size(); i-- > 0;) {
      sizes_and_strides_.stride_at_unchecked(i) = acc;
      acc *= std::max<int64_t>(sz[i], 1);
    }
  }
  storage_offset_ = tensor_.storage_offset();
  data_type_ = c10::scalarTypeToTypeMeta(to_at(tensor_.dtype()));
  refresh_numel();
  refresh_contiguous();
}

void LzTensorImpl::set_tensor(lazyx::Tensor t, c10::Storage storage) {
  tensor_ = std::move(t);
  storage_ = std::move(storage);
  refresh_meta();
}

c10::intrusive_ptr<c10::TensorImpl> LzTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  fresh_ = false;
  auto impl = c10::make_intrusive<LzTensorImpl>(tensor_, storage_);
  copy_tensor_metadata(this, impl.get(), version_counter, allow_tensor_metadata_change);
  impl->refresh_numel();
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> LzTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  fresh_ = false;
  auto impl = c10::make_intrusive<LzTensorImpl>(tensor_, storage_);
  copy_tensor_metadata(this, impl.get(), std::move(version_counter), allow_tensor_metadata_change);
  impl->refresh_numel();
  return impl;
}

void LzTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<LzTensorImpl*>(impl.get());
  TORCH_CHECK(other != nullptr, "lazyx: shallow_copy_from needs a lazyx device tensor");
  other->fresh_ = false;
  fresh_ = false;
  copy_tensor_metadata(other, this, version_counter(), allow_tensor_metadata_change());
  tensor_ = other->tensor_;
  refresh_numel();
}

// ---------------------------------------------------------------------------------------------
// Conversions.
lazyx::Dtype to_lz(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return lazyx::kBool;
    case c10::ScalarType::Int:
      return lazyx::kInt32;
    case c10::ScalarType::Long:
      return lazyx::kInt64;
    case c10::ScalarType::Half:
      return lazyx::kFloat16;
    case c10::ScalarType::BFloat16:
      return lazyx::kBFloat16;
    case c10::ScalarType::Float:
      return lazyx::kFloat32;
    case c10::ScalarType::Double:
      return lazyx::kFloat64;
    case c10::ScalarType::Byte:
      return lazyx::kUInt8;
    case c10::ScalarType::Char:
      return lazyx::kInt8;
    case c10::ScalarType::Short:
      return lazyx::kInt16;
    default:
      TORCH_CHECK(false, "[lazyx] dtype ", t,
                  " is not supported on the lazyx device. Use float32, float64, float16, "
                  "bfloat16, int64, int32, int16, int8, uint8 or bool.");
  }
}

c10::ScalarType to_at(lazyx::Dtype d) {
  switch (d) {
    case lazyx::Dtype::Bool:
      return c10::ScalarType::Bool;
    case lazyx::Dtype::UInt8:
      return c10::ScalarType::Byte;
    case lazyx::Dtype::Int8:
      return c10::ScalarType::Char;
    case lazyx::Dtype::Int16:
      return c10::ScalarType::Short;
    case lazyx::Dtype::Int32:
      return c10::ScalarType::Int;
    case lazyx::Dtype::Int64:
      return c10::ScalarType::Long;
    case lazyx::Dtype::Float16:
      return c10::ScalarType::Half;
    case lazyx::Dtype::BFloat16:
      return c10::ScalarType::BFloat16;
    case lazyx::Dtype::Float32:
      return c10::ScalarType::Float;
    case lazyx::Dtype::Float64:
      return c10::ScalarType::Double;
  }
  return c10::ScalarType::Float;
}

lazyx::Scalar to_lz(const c10::Scalar& s) {
  if (s.isBoolean()) return lazyx::Scalar(s.toBool());
  if (s.isIntegral(false)) return lazyx::Scalar(static_cast<long long>(s.toLong()));
  TORCH_CHECK(!s.isComplex(), "[lazyx] complex scalars are not supported.");
  return lazyx::Scalar(s.toDouble());
}

c10::Scalar to_at_scalar(const lazyx::Scalar& s) {
  if (s.is_bool()) return c10::Scalar(s.to_int() != 0);
  if (s.is_floating()) return c10::Scalar(s.to_double());
  return c10::Scalar(static_cast<int64_t>(s.to_int()));
}

bool is_lazyx(const at::Tensor& t) { return t.defined() && t.device().type() == kDeviceType; }

LzTensorImpl* lz_impl(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "[lazyx] expected a tensor, got an undefined one.");
  c10::TensorImpl* p = t.unsafeGetTensorImpl();
  // LzTensorImpl is final, so an exact type check (cheaper than dynamic_cast) is enough.
  auto* impl = typeid(*p) == typeid(LzTensorImpl) ? static_cast<LzTensorImpl*>(p) : nullptr;
  TORCH_CHECK(impl != nullptr, "[lazyx] expected a tensor on the lazyx device (lazy), got one on ",
              t.device(), ". Move it with .to(lazyx.device()).");
  return impl;
}

bool is_cpu_scalar(const at::Tensor& t) {
  return t.defined() && t.dim() == 0 && t.device().is_cpu();
}

lazyx::Scalar cpu_scalar(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::ScalarType::Double:
      return lazyx::Scalar(*t.data_ptr<double>());
    case c10::ScalarType::Float:
      return lazyx::Scalar(static_cast<double>(*t.data_ptr<float>()));
    case c10::ScalarType::Long:
      return lazyx::Scalar(static_cast<long long>(*t.data_ptr<int64_t>()));
    case c10::ScalarType::Int:
      return lazyx::Scalar(static_cast<long long>(*t.data_ptr<int32_t>()));
    case c10::ScalarType::Bool:
      return lazyx::Scalar(*t.data_ptr<bool>());
    default:
      return to_lz(t.item());
  }
}

lazyx::Tensor lz(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "[lazyx] expected a tensor, got an undefined one.");
  if (t.device().is_cpu()) return upload(t);
  LzTensorImpl* impl = lz_impl(t);
  impl->set_fresh(false);
  return impl->tensor();
}

at::Tensor wrap(lazyx::Tensor t) {
  c10::Storage s = make_storage(t);
  return at::detail::make_tensor<LzTensorImpl>(std::move(t), std::move(s));
}

at::Tensor wrap_view(lazyx::Tensor t, const at::Tensor& of) {
  return at::detail::make_tensor<LzTensorImpl>(std::move(t), lz_impl(of)->storage());
}

// ---------------------------------------------------------------------------------------------
// Host transfers. lazyx stores every dtype as PyTorch does on CPU (bool as one byte, float16
// and bfloat16 as their 16-bit patterns), so both directions are one memcpy of the contiguous
// data, with no staging vector.
lazyx::Tensor upload(const at::Tensor& cpu) {
  at::Tensor c = cpu.contiguous();
  const lazyx::Dtype d = to_lz(c.scalar_type());  // raises for unsupported dtypes
  char none = 0;
  return lazyx::from_host(c.numel() > 0 ? c.data_ptr() : &none,
                          lazyx::Shape(c.sizes().begin(), c.sizes().end()), d);
}

at::Tensor download(const lazyx::Tensor& t) {
  PyCause cause("value read by .cpu()");  // an outer cause (printing, a fallback) wins
  at::Tensor out = at::empty(c10::IntArrayRef(t.sizes().data(), t.sizes().size()),
                             at::TensorOptions().dtype(to_at(t.dtype())));
  char none = 0;  // an empty tensor still goes through the read (a donated one raises)
  t.copy_to_host(out.numel() > 0 ? out.data_ptr() : &none);
  return out;
}

void seed_from_torch(c10::optional<at::Generator> gen) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : at::detail::getDefaultCPUGenerator();
  TORCH_CHECK(g.device().is_cpu(),
              "[lazyx] random ops on the lazyx device take their seed from a CPU generator.");
  uint64_t seed;
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    seed = at::check_generator<at::CPUGeneratorImpl>(g)->random64();
  }
  lazyx::manual_seed(seed);
}

// ---------------------------------------------------------------------------------------------
// as_strided(sizes, strides, offset) over the storage of `self`: lazyx's own strided window onto
// the storage's base. Overlapping windows (unfold with step < size) can be read; lazyx refuses
// in-place writes through them.
lazyx::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                         int64_t offset) {
  TORCH_CHECK(sizes.size() == strides.size(), "[as_strided] sizes and strides differ in length.");
  auto* st = dynamic_cast<LzStorage*>(lz_impl(self)->storage().unsafeGetStorageImpl());
  TORCH_CHECK(st != nullptr, "[as_strided] the tensor has no lazyx storage.");
  return st->root.as_strided(lazyx::Shape(sizes.begin(), sizes.end()),
                             lazyx::Shape(strides.begin(), strides.end()), offset);
}

}  // namespace lazyx_bridge
