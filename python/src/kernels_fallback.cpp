// The boxed fallback (every op without a native kernel runs on CPU and is counted as
// "aten::<op>", as PyTorch/XLA does; ops whose schema under-declares their writes included) and
// the _foreach_* kernels.
#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "diag_bridge.h"
#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

// Whether no two elements of a layout share a memory location (dims of size 1 aside): each dim's
// stride, in increasing order, passes the extent of the dims below it.
bool non_overlapping(const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] > 1) dims.emplace_back(stride[i], size[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;  // elements spanned by the dims so far
  for (const auto& [st, sz] : dims) {
    if (st < extent) return false;
    extent = st * (sz - 1) + extent;
  }
  return true;
}

// The CPU copies a fallback op runs on keep the device tensors' strides, so the CPU op sees the
// layout eager would. Results can depend on it: _linalg_det, _linalg_slogdet and
// _linalg_solve_ex factor A or A^T depending on whether A is contiguous, and their backward
// reads that choice off the device tensor (a contiguous copy of a strided A gave transposed
// gradients). Expanded dims are expanded again; overlapping windows stay contiguous copies.
Tensor cpu_copy_keeping_strides(const Tensor& t) {
  if (!t.defined() || !is_lazyx(t) || t.is_non_overlapping_and_dense()) return to_cpu(t);
  std::vector<int64_t> size(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> stride(t.strides().begin(), t.strides().end());
  Tensor src = t;
  for (size_t i = 0; i < size.size(); ++i) {
    if (stride[i] == 0 && size[i] > 1) {
      src = src.narrow(static_cast<int64_t>(i), 0, 1);
      size[i] = 1;
    }
  }
  if (!non_overlapping(size, stride)) return t.cpu();
  Tensor c = at::empty_strided(size, stride, t.options().device(at::kCPU));
  c.copy_(src);
  return c.expand(t.sizes());
}

// aten::_to_cpu, which torch's cpu_fallback calls for its arguments.
std::vector<Tensor> to_cpu_list(at::TensorList ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cpu_copy_keeping_strides(t));
  return out;
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) { impl(m, "_to_cpu", LZ_FN(to_cpu_list)); }

// torch's cpu_fallback does not write mutated tensor lists back (the _foreach_* ops of foreach
// optimizers), so those take this path: move every tensor and tensor list to CPU, run the op
// there, copy written arguments back into the device tensors (keeping their identity) and move returned tensors to the device.
void tensor_list_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t n = args.size();
  auto first = stack->end() - static_cast<std::ptrdiff_t>(n);
  std::vector<c10::IValue> orig(first, stack->end());
  std::vector<bool> written(n, false);
  for (size_t i = 0; i < n; ++i) {
    const c10::AliasInfo* ai = args[i].alias_info();
    written[i] = ai != nullptr && ai->isWrite();
  }
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = *(first + static_cast<std::ptrdiff_t>(i));
    if (v.isTensor() && is_lazyx(v.toTensor())) {
      v = cpu_copy_keeping_strides(v.toTensor());
    } else if (v.isTensorList()) {
      v = c10::IValue(to_cpu_list(v.toTensorVector()));
    }
  }
  std::vector<c10::IValue> moved(first, stack->end());
  op.callBoxed(stack);
  for (size_t i = 0; i < n; ++i) {
    if (!written[i]) continue;
    if (orig[i].isTensor() && is_lazyx(orig[i].toTensor())) {
      copy_impl(orig[i].toTensor(), moved[i].toTensor());
    } else if (orig[i].isTensorList()) {
      auto o = orig[i].toTensorVector();
      auto c = moved[i].toTensorVector();
      for (size_t k = 0; k < o.size(); ++k) {
        if (is_lazyx(o[k])) copy_impl(o[k], c[k]);
      }
    }
  }
  const auto& rets = op.schema().returns();
  const size_t nret = rets.size();
  const auto ret0 = stack->end() - static_cast<std::ptrdiff_t>(nret);
  for (auto it = ret0; it != stack->end(); ++it) {
    // A return that is a written argument (`Tensor(a!)`) is that device tensor itself.
    const c10::AliasInfo* rai = rets[static_cast<size_t>(it - ret0)].alias_info();
    size_t same = n;
    for (size_t i = 0; rai != nullptr && rai->isWrite() && i < n && same == n; ++i) {
      const c10::AliasInfo* ai = args[i].alias_info();
      if (ai != nullptr && ai->beforeSets() == rai->beforeSets()) same = i;
    }
    if (same < n) {
      *it = orig[same];
    } else if (it->isTensor() && it->toTensor().defined() && it->toTensor().device().is_cpu()) {
      *it = it->toTensor().to(device());
    } else if (it->isTensorList()) {
      std::vector<Tensor> l;
      for (const Tensor& t : it->toTensorVector()) l.push_back(t.to(device()));
      *it = c10::IValue(l);
    }
  }
}

// _foreach_<op>: a loop over the per-tensor op (as PyTorch's own slow path does), so each element
// runs through the native kernels. `aten::_foreach_add_.List` maps to `aten::add_.Tensor`,
// `.Scalar`/`.ScalarList` to `.Scalar`, and unary ones to the op of the same name.
const c10::OperatorHandle* foreach_target(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<std::string, const c10::OperatorHandle*> cache;
  const auto& name = op.schema().operator_name();
  std::string key = name.name + "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string base = "aten::" + name.name.substr(std::string("aten::_foreach_").size());
  std::vector<std::string> overloads;
  const std::string& ov = name.overload_name;
  if (ov == "List")
    overloads = {"Tensor", ""};
  else if (ov == "Scalar" || ov == "ScalarList" || ov == "Tensor")
    overloads = {"Scalar", ""};
  else
    overloads = {"", "Scalar"};
  const c10::OperatorHandle* found = nullptr;
  // An in-place foreach op without an in-place per-tensor op (maximum_) uses the out-of-place
  // op and copies the result into self.
  std::vector<std::string> bases = {base};
  if (base.back() == '_') bases.push_back(base.substr(0, base.size() - 1));
  for (const auto& b : bases) {
    for (const auto& o : overloads) {
      auto h = c10::Dispatcher::singleton().findOp(c10::OperatorName(b, o));
      if (h.has_value() && h->hasSchema() &&
          h->schema().arguments().size() >= op.schema().arguments().size()) {
        found = new c10::OperatorHandle(*h);
        break;
      }
    }
    if (found) break;
  }
  cache[key] = found;
  return found;
}

void foreach_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorHandle* target = foreach_target(op);
  if (target == nullptr) {
    lazyx::metrics::add_counter(op.schema().name());
    PyCause cause("CPU fallback " + op.schema().name() + " needed the value");
    lazyx::ProfileSpan span(op.schema().name().c_str(), "fallback");
    tensor_list_fallback(op, stack);
    return;
  }
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> src(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  torch::jit::drop(*stack, n);
  // The list the op loops over: the first argument, or the first list after a scalar
  // (_foreach_pow.ScalarAndTensor(Scalar self, Tensor[] exponent)).
  size_t lead = 0;
  while (lead + 1 < n && !src[lead].isTensorList()) ++lead;
  const std::vector<Tensor> self = src[lead].toTensorVector();
  const size_t count = self.size();
  const auto& targs = target->schema().arguments();
  // Each argument of the per-tensor op, unpacked once: per_elem[j][i] for lists, same[j] for
  // arguments every element shares (toTensorVector copies the list, and a tensor of scalars is
  // read once, not once per element).
  std::vector<std::vector<c10::IValue>> per_elem(targs.size());
  std::vector<c10::IValue> same(targs.size());
  for (size_t j = 0; j < targs.size(); ++j) {
    if (j >= n) {
      same[j] = *targs[j].default_value();
      continue;
    }
    const c10::IValue& v = src[j];
    std::vector<c10::IValue>& l = per_elem[j];
    if (j == lead) {
      l.assign(self.begin(), self.end());
    } else if (v.isTensorList()) {
      for (const Tensor& t : v.toTensorVector()) l.emplace_back(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) l.push_back(e);
    } else if (v.isDoubleList()) {
      for (double d : v.toDoubleVector()) l.emplace_back(d);
    } else if (v.isIntList()) {
      for (int64_t d : v.toIntVector()) l.emplace_back(d);
    } else if (targs[j].type()->kind() == c10::TypeKind::NumberType && v.isTensor()) {
      Tensor flat = v.toTensor().cpu().reshape({-1});
      if (flat.numel() == 1) {  // one scalar for every element
        same[j] = flat[0].item();
        continue;
      }
      for (size_t i = 0; i < count; ++i) l.emplace_back(flat[static_cast<int64_t>(i)].item());
    } else {
      same[j] = v;
      continue;
    }
    TORCH_CHECK(l.size() == count, "[", op.schema().name(), "] argument ", j, " has ", l.size(),
                " elements, but self has ", count, ".");
  }
  const bool copy_back = op.schema().name().back() == '_' && target->schema().name().back() != '_';
  const bool returns = !op.schema().returns().empty();
  std::vector<Tensor> results;
  torch::jit::Stack s;
  for (size_t i = 0; i < count; ++i) {
    s.clear();
    for (size_t j = 0; j < targs.size(); ++j) {
      s.push_back(per_elem[j].empty() ? same[j] : per_elem[j][i]);
    }
    target->callBoxed(&s);
    if (copy_back) {
      copy_impl(self[i], s.back().toTensor());
    } else if (returns && !s.empty() && s.back().isTensor()) {
      results.push_back(s.back().toTensor());
    }
  }
  if (returns) stack->push_back(c10::IValue(results));
}

// True if an annotation marks a value (or, for a list, its elements) as an alias of an input that
// the op does not write: a view op's return, as `Tensor(a)` in `unfold(Tensor(a) self, ...)`.
bool is_view_alias(const c10::AliasInfo* ai) {
  if (ai == nullptr) return false;
  if (!ai->isWrite() && !ai->beforeSets().empty()) return true;
  for (const c10::AliasInfo& c : ai->containedTypes()) {
    if (is_view_alias(&c)) return true;
  }
  return false;
}

void lazyx_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  // On CPU a view op would return a copy, and writes through it would be silently lost.
  for (const auto& r : schema.returns()) {
    TORCH_CHECK(!is_view_alias(r.alias_info()), "[", schema.name(),
                "] is a view op without a lazyx kernel: the CPU fallback would return a copy, not "
                "a view. Call .cpu() on the input first, or add a view kernel to "
                "python/src/kernels_views.cpp.");
  }
  // A written CPU tensor next to device operands: raise as CUDA does (check_written).
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* ai = args[i].alias_info();
    if (ai == nullptr || !ai->isWrite()) continue;
    const c10::IValue& v = *(stack->end() - static_cast<std::ptrdiff_t>(args.size() - i));
    if (v.isTensor()) {
      check_written(v.toTensor());
    } else if (v.isTensorList()) {
      for (const Tensor& t : v.toTensorVector()) check_written(t);
    }
  }
  lazyx::metrics::add_counter(schema.name());
  PyCause cause("CPU fallback " + schema.name() + " needed the value");
  lazyx::ProfileSpan span(schema.name().c_str(), "fallback");
  for (const auto& a : schema.arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite() &&
        a.type()->kind() == c10::TypeKind::ListType) {
      tensor_list_fallback(op, stack);
      return;
    }
  }
  at::native::cpu_fallback(op, stack);
}

// A boxed kernel with engine errors rethrown as lazyx.LazyxError (LZ_FN for boxed kernels).
template <void (*F)(const c10::OperatorHandle&, torch::jit::Stack*)>
void guarded_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  try {
    F(op, stack);
  } catch (const lazyx::Error& e) {
    rethrow_op_error(e);
  }
}

// Sparse layouts have no lazyx kernels: every op on them raises, naming the layout.
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, "[", op.schema().name(),
              "] sparse layouts are not supported on the lazyx "
              "device (only torch.strided); use .to_dense() first or run the sparse op on CPU.");
}

TORCH_LIBRARY_IMPL(_, SparseLazy, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, Lazy, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&guarded_boxed<&lazyx_fallback>>());
}

// A composite run for the Lazy key: the kernel torch keeps in PrivateUse1's slot, which no
// backend uses here (see register_composite_kernels).
void composite_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* s) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), s);
}

}  // namespace

// torch leaves the Lazy key out of CompositeExplicitAutogradNonFunctional kernels (its own
// lazy backend functionalizes instead), so ops such as new_empty_strided, select_backward,
// gelu_ or pixel_shuffle would reach the CPU fallback. Every such op without a lazyx kernel runs
// its composite, which calls ops lazyx has (called when the module loads, after the static
// registrations).
void register_composite_kernels() {
  register_boxed_for_lazy<&composite_kernel>("aten", [](const c10::OperatorHandle& op) {
    return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  });
}

// Registers foreach_kernel for every aten::_foreach_* op (called when the module loads).
void register_foreach_kernels() {
  register_boxed_for_lazy<&guarded_boxed<&foreach_kernel>>(
      "aten", [](const c10::OperatorHandle& op) {
        return op.schema().name().rfind("aten::_foreach_", 0) == 0;
      });
}

}  // namespace lazyx_bridge
