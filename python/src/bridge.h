// The PyTorch bridge: lazyx as PyTorch's Lazy device ("lazy", the key torch reserves for
// lazy tensor engines: it runs their backward on the calling thread, not a device thread).
//
// Every device tensor is an LzTensorImpl, a c10::TensorImpl that holds a lazyx::Tensor handle and
// mirrors its sizes, strides and storage offset. Views of one lazyx storage share one LzStorage (a
// zero-byte c10::StorageImpl), so PyTorch's aliasing checks (is_alias_of) see what lazyx sees, and
// the LzStorage keeps the handle of the base tensor that covers the whole storage (as_strided is
// expressed over it). In-place ops run lazyx's in-place ops on the same handle, so a tensor keeps
// its identity and lazyx's alias source through chains of in-place updates (ALIASING.md).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <lazyx/lazyx.h>

namespace lazyx_bridge {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::Lazy;
inline c10::Device device() { return c10::Device(kDeviceType, 0); }

// One per lazyx storage: what PyTorch sees as the storage of the tensor and its views.
struct LzStorage : public c10::StorageImpl {
  explicit LzStorage(lazyx::Tensor root_tensor);
  lazyx::Tensor root;  // a base tensor over the whole storage (never a view)
};

struct LzTensorImpl final : public c10::TensorImpl {
  LzTensorImpl(lazyx::Tensor t, c10::Storage storage);

  const lazyx::Tensor& tensor() const { return tensor_; }
  // Replaces the handle (used only for tensors nobody else can see yet, and by resize_).
  void set_tensor(lazyx::Tensor t, c10::Storage storage);
  // Fresh: made by empty/empty_strided and not used since, so a copy_ into it may take the
  // source's handle instead of recording a copy (the tensor then holds the uploaded buffer).
  // Never while another tensor (a view) shares the storage: the view would lose its base.
  bool fresh() const { return fresh_ && storage_.use_count() == 1; }
  void set_fresh(bool f) { fresh_ = f; }
  void refresh_meta();

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;

 private:
  lazyx::Tensor tensor_;
  mutable bool fresh_ = false;
};

// Dtype conversions; unsupported dtypes raise with a clear message.
lazyx::Dtype to_lz(c10::ScalarType t);
c10::ScalarType to_at(lazyx::Dtype d);
lazyx::Scalar to_lz(const c10::Scalar& s);
c10::Scalar to_at_scalar(const lazyx::Scalar& s);

bool is_lazyx(const at::Tensor& t);
LzTensorImpl* lz_impl(const at::Tensor& t);  // raises unless t is a device tensor
// The lazyx handle of a device tensor. A CPU tensor (a 0-dim wrapped number or a small CPU
// operand) is uploaded.
lazyx::Tensor lz(const at::Tensor& t);
// Wraps a new lazyx tensor (a fresh storage) as a device tensor.
at::Tensor wrap(lazyx::Tensor t);
// Wraps a view of `of`'s storage.
at::Tensor wrap_view(lazyx::Tensor t, const at::Tensor& of);

// Host <-> device transfers.
lazyx::Tensor upload(const at::Tensor& cpu);  // any CPU tensor; returns a base tensor
at::Tensor download(const lazyx::Tensor& t);  // a contiguous CPU tensor (partial sync)

// A CPU 0-dim wrapped number (`x + 1` in Python) as a scalar operand.
bool is_cpu_scalar(const at::Tensor& t);
lazyx::Scalar cpu_scalar(const at::Tensor& t);

// The seed for the next random op, drawn from PyTorch's default CPU generator so that
// torch.manual_seed makes device randomness reproducible.
void seed_from_torch(c10::optional<at::Generator> gen);

// as_strided over the storage of `self` (lazyx::Tensor::as_strided on its base).
lazyx::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                         int64_t offset);

// Registers the native _foreach_* kernels (a loop over the per-tensor op). Their names are only
// known once libtorch has registered its schemas, so the module calls this when it loads.
void register_foreach_kernels();
// Runs the CompositeExplicitAutogradNonFunctional kernels torch leaves out for the Lazy key.
void register_composite_kernels();

}  // namespace lazyx_bridge
