// What the kernels_*.cpp files share: argument conversions and the helpers several op families
// use. Each file registers its own kernels with TORCH_LIBRARY_IMPL(aten, Lazy, m); ops
// without a kernel reach the boxed fallback in kernels_fallback.cpp.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/library.h>

#include "bridge.h"

namespace lazyx_bridge {

// Every kernel registration goes through impl(m, name, kernel). A kernel whose C++ signature the
// installed torch rejects (its schema changed) is recorded instead of aborting the process while
// the module loads; importing lazyx then raises once, naming every such op (module.cpp). The
// names registered are kept for the registration audit (python/tests/test_registrations.py).
void note_registration(const char* name, const std::string& error);
template <class F>
void impl(torch::Library& m, const char* name, F&& f) {
  try {
    m.impl(name, std::forward<F>(f));
    note_registration(name, "");
  } catch (const c10::Error& e) {
    note_registration(name, e.what_without_backtrace());
  }
}
// Registers the boxed kernel F for the Lazy key on every op of namespace `ns` that has no Lazy
// kernel yet and that `want` accepts (at module load, after the static registrations).
template <auto F>
void register_boxed_for_lazy(const char* ns, bool (*want)(const c10::OperatorHandle&)) {
  auto* lib = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::Lazy, __FILE__,
                                 __LINE__);  // lives as long as the process: torch keeps its kernels
  const std::string prefix = std::string(ns) + "::";
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind(prefix, 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::Lazy) || !want(*op)) continue;
    std::string full = name.name.substr(prefix.size()) +
                       (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<F>());
  }
}

struct Registration {
  std::string name;   // as registered: "add.Tensor"
  std::string error;  // empty when torch took the kernel
};
const std::vector<Registration>& registrations();

using LT = lazyx::Tensor;

inline lazyx::Shape to_shape(c10::IntArrayRef s) { return lazyx::Shape(s.begin(), s.end()); }
inline lazyx::Shape to_shape(c10::SymIntArrayRef s) { return to_shape(C10_AS_INTARRAYREF_SLOW(s)); }
inline std::vector<int64_t> to_dims(c10::IntArrayRef s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

inline int64_t wrap_dim(int64_t d, int64_t n) {
  if (n == 0) n = 1;
  if (d < 0) d += n;
  TORCH_CHECK(d >= 0 && d < n, "[lazyx] dimension out of range (expected to be in range of [", -n,
              ", ", n - 1, "], but got ", d, ")");
  return d;
}

// var/std's correction (Scalar? since torch 2.0; None means Bessel's 1).
inline double correction_value(const c10::optional<c10::Scalar>& c) {
  return c.has_value() ? c->toDouble() : 1.0;
}

inline bool is_one(const c10::Scalar& s) { return !s.isComplex() && s.toDouble() == 1.0; }
// An integer engine scalar (integer tensors keep integer arithmetic).
inline lazyx::Scalar li(int64_t v) { return lazyx::Scalar(static_cast<long long>(v)); }

inline lazyx::Dtype default_dtype(c10::optional<c10::ScalarType> d) {
  return to_lz(d.value_or(c10::get_default_dtype_as_scalartype()));
}

// A second operand that may be a CPU scalar, as a lazyx tensor of `like`'s dtype.
inline LT operand(const at::Tensor& t, const LT& like) {
  if (is_cpu_scalar(t)) return lazyx::full({}, cpu_scalar(t), like.dtype());
  return lz(t);
}

// The value `v` (same shape) becomes self's value. A fresh tensor (just made by empty) takes a
// private handle directly, so `.to(device)` leaves it holding the uploaded buffer.
at::Tensor& assign(at::Tensor& self, LT v, bool v_is_private);

// PyTorch's resize_ (the storage keeps its data), and the out= rule: an out tensor of another
// shape is resized (with torch's warning unless it was empty), then takes the result `r`.
void resize_impl(const at::Tensor& self, c10::IntArrayRef size);
at::Tensor& write_out(at::Tensor& out, LT r);

// sum(a * b) in the operands' dtype, as eager's dot and vdot give it: an integer sum wraps in
// that dtype (kernels_linalg.cpp).
LT dot_same_dtype(const at::Tensor& a, const at::Tensor& b);

// pow(x, e) for a scalar e as eager's CPU kernel computes it (kernels_elementwise.cpp).
LT pow_scalar(const LT& x, const c10::Scalar& e);

// dst <- src, any direction between CPU and the device.
void copy_impl(const at::Tensor& dst, const at::Tensor& src);

// Engine errors raised while an op is traced reach Python as lazyx.LazyxError with the engine's
// message: torch's bindings turn a torch::PyTorchError into its python_type() (module.cpp).
[[noreturn]] void rethrow_op_error(const lazyx::Error& e);

// A tensor an op writes (in place or out=) must be on the device: PyTorch dispatches an op to
// the device when any operand is there, and writing into an upload of a CPU tensor would lose the
// write. Raises as CUDA does for mixed devices.
void check_written(const at::Tensor& t);
template <class A, class V>
inline void check_arg(const V& v) {
  if constexpr (std::is_same_v<A, at::Tensor&>) check_written(v);
}

// Kernel F with engine errors rethrown by rethrow_op_error; register kernels with LZ_FN(f).
// Every non-const Tensor& argument (what the op writes) is checked by check_written.
template <auto F>
struct Guarded;
template <class R, class... A, R (*F)(A...)>
struct Guarded<F> {
  static R call(A... a) {
    (check_arg<A>(a), ...);
    try {
      return F(std::forward<A>(a)...);
    } catch (const lazyx::Error& e) {
      rethrow_op_error(e);
    }
  }
};
#define LZ_FN(f) TORCH_FN(::lazyx_bridge::Guarded<&f>::call)

// For ops that run on CPU: a device tensor's CPU copy (CPU and undefined tensors pass as they
// are), and a CPU result moved to the device.
// A 0-d tensor as [1], for ops that need a dim.
inline LT v1(const LT& t) { return t.dim() == 0 ? t.view({1}) : t; }
inline at::Tensor to_cpu(const at::Tensor& t) { return is_lazyx(t) ? t.cpu() : t; }
inline c10::optional<at::Tensor> to_cpu(const c10::optional<at::Tensor>& t) {
  if (!t.has_value()) return t;
  return to_cpu(*t);
}
inline at::Tensor to_device(const at::Tensor& t) {
  return t.defined() && !is_lazyx(t) ? t.to(device()) : t;
}

}  // namespace lazyx_bridge
