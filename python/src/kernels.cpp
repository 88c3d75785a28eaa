// Native PrivateUse1 kernels: aten ops lowered to lazyx ops. Everything not here falls back to
// CPU through at::native::cpu_fallback, counted per op as "aten::<op>" (as PyTorch/XLA does).
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/index_ops.h>
#include <torch/library.h>

#include <cmath>
#include <mutex>
#include <unordered_map>

#include "bridge.h"

namespace lazyx_bridge {
namespace {

using at::Tensor;
using c10::optional;
using lazyx::Shape;
using LT = lazyx::Tensor;

Shape to_shape(c10::IntArrayRef s) { return Shape(s.begin(), s.end()); }
Shape to_shape(c10::SymIntArrayRef s) { return to_shape(c10::asIntArrayRefSlow(s)); }
std::vector<int64_t> to_dims(c10::IntArrayRef s) { return std::vector<int64_t>(s.begin(), s.end()); }

int64_t wrap_dim(int64_t d, int64_t n) {
  if (n == 0) n = 1;
  if (d < 0) d += n;
  TORCH_CHECK(d >= 0 && d < n, "[lazyx] dimension out of range (expected to be in range of [", -n,
              ", ", n - 1, "], but got ", d, ")");
  return d;
}

bool is_one(const c10::Scalar& s) { return !s.isComplex() && s.toDouble() == 1.0; }

lazyx::Dtype default_dtype(optional<c10::ScalarType> d) {
  return to_lz(d.value_or(c10::get_default_dtype_as_scalartype()));
}

// The value `v` (same shape) becomes self's value. A fresh tensor (just made by empty) takes a
// private handle directly, so `.to(device)` leaves it holding the uploaded buffer.
Tensor& assign(Tensor& self, LT v, bool v_is_private) {
  LzTensorImpl* impl = lz_impl(self);
  if (impl->fresh() && v_is_private && !v.is_view() && v.sizes() == impl->tensor().sizes() &&
      v.dtype() == impl->tensor().dtype()) {
    impl->set_tensor(v, c10::Storage(c10::make_intrusive<LzStorage>(v)));
    impl->set_fresh(false);
    return self;
  }
  impl->set_fresh(false);
  LT t = impl->tensor();
  t.copy_(v);
  return self;
}

// ---------------------------------------------------------------------------------------------
// Creation and copies.
Tensor empty_memory_format(c10::SymIntArrayRef size, optional<c10::ScalarType> dtype,
                           optional<c10::Layout>, optional<c10::Device>, optional<bool>,
                           optional<c10::MemoryFormat>) {
  Tensor t = wrap(lazyx::zeros(to_shape(size), default_dtype(dtype)));
  lz_impl(t)->set_fresh(true);
  return t;
}

// Never calls a view op (ENVIRONMENT.md): lazyx base tensors are contiguous, the strides asked
// for are a layout hint only.
Tensor empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef, optional<c10::ScalarType> dtype,
                     optional<c10::Layout>, optional<c10::Device>, optional<bool>) {
  Tensor t = wrap(lazyx::zeros(to_shape(size), default_dtype(dtype)));
  lz_impl(t)->set_fresh(true);
  return t;
}

// dst <- src, any direction between CPU and the device.
void copy_impl(const Tensor& dst, const Tensor& src) {
  if (is_lazyx(dst)) {
    Tensor d = dst;
    if (is_lazyx(src)) {
      LT s = lz(src);
      LzTensorImpl* di = lz_impl(dst);
      if (di->fresh()) {
        LT v = s.dtype() != di->tensor().dtype() ? s.to(di->tensor().dtype()) : s.clone();
        if (v.sizes() != di->tensor().sizes()) v = v.expand(di->tensor().sizes()).clone();
        assign(d, v, true);
      } else {
        assign(d, s, false);
      }
    } else {
      at::Tensor c = src.to(dst.scalar_type());
      if (c.sizes() != dst.sizes()) c = c.expand(dst.sizes());
      assign(d, upload(c), true);
    }
    return;
  }
  TORCH_CHECK(is_lazyx(src), "[lazyx] copy_ between two non-lazyx tensors reached the lazyx device.");
  at::Tensor c = download(lz(src));
  dst.copy_(c);
}

Tensor& copy_(Tensor& self, const Tensor& src, bool) {
  copy_impl(self, src);
  return self;
}

Tensor _copy_from(const Tensor& self, const Tensor& dst, bool) {
  copy_impl(dst, self);
  return dst;
}

Tensor _copy_from_and_resize(const Tensor& self, const Tensor& dst) {
  if (is_lazyx(dst) && dst.sizes() != self.sizes()) {
    LzTensorImpl* impl = lz_impl(dst);
    LT z = lazyx::zeros(to_shape(self.sizes()), impl->tensor().dtype());
    impl->set_tensor(z, c10::Storage(c10::make_intrusive<LzStorage>(z)));
    impl->set_fresh(true);
  } else if (!is_lazyx(dst) && dst.sizes() != self.sizes()) {
    dst.resize_(self.sizes());
  }
  copy_impl(dst, self);
  return dst;
}

const Tensor& resize_(const Tensor& self, c10::SymIntArrayRef size, optional<c10::MemoryFormat>) {
  LzTensorImpl* impl = lz_impl(self);
  Shape s = to_shape(size);
  if (impl->tensor().sizes() == s) return self;
  LT z = lazyx::zeros(s, impl->tensor().dtype());
  impl->set_tensor(z, c10::Storage(c10::make_intrusive<LzStorage>(z)));
  impl->set_fresh(true);
  return self;
}

Tensor clone(const Tensor& self, optional<c10::MemoryFormat>) { return wrap(lz(self).clone()); }

c10::Scalar _local_scalar_dense(const Tensor& self) {
  LT t = lz(self);
  switch (t.dtype()) {
    case lazyx::Dtype::Bool: return c10::Scalar(t.item<bool>());
    case lazyx::Dtype::Int32:
    case lazyx::Dtype::Int64: return c10::Scalar(t.item<int64_t>());
    case lazyx::Dtype::Float16: return c10::Scalar(c10::Half(static_cast<float>(t.item<double>())));
    case lazyx::Dtype::BFloat16:
      return c10::Scalar(c10::BFloat16(static_cast<float>(t.item<double>())));
    case lazyx::Dtype::Float32: return c10::Scalar(static_cast<float>(t.item<double>()));
    case lazyx::Dtype::Float64: return c10::Scalar(t.item<double>());
  }
  return c10::Scalar(0);
}

Tensor& fill_scalar(Tensor& self, const c10::Scalar& v) {
  LzTensorImpl* impl = lz_impl(self);
  if (impl->fresh()) {
    return assign(self, lazyx::full(impl->tensor().sizes(), to_lz(v), impl->tensor().dtype()), true);
  }
  LT t = lz(self);
  if (!t.is_pending() && !lazyx::is_donated(t)) {
    // Workaround: a fill that does not read the old buffer leaves it out of the program, so the
    // engine cannot donate it and the step holds old and new buffer at once (zero_grad with
    // set_to_none=False). A masked fill with an all-true mask has the same value (NaN and inf
    // included) but reads the buffer, which then goes to the new value.
    t.masked_fill_(lazyx::full({}, lazyx::Scalar(true), lazyx::kBool), to_lz(v));
    return self;
  }
  t.fill_(to_lz(v));
  return self;
}

Tensor& fill_tensor(Tensor& self, const Tensor& v) {
  if (is_cpu_scalar(v)) return fill_scalar(self, to_at_scalar(cpu_scalar(v)));
  LT t = lz(self);
  t.copy_(lz(v).to(t.dtype()).expand(t.sizes()));
  return self;
}

Tensor& zero_(Tensor& self) { return fill_scalar(self, c10::Scalar(0)); }

// Random numbers.
Tensor& normal_(Tensor& self, double mean, double std, optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::randn(t.sizes(), lazyx::is_floating(t.dtype()) ? t.dtype() : lazyx::kFloat32);
  if (std != 1.0) r = r.mul(std);
  if (mean != 0.0) r = r.add(mean);
  if (r.dtype() != t.dtype()) r = r.to(t.dtype());
  return assign(self, r, true);
}

Tensor& uniform_(Tensor& self, double from, double to, optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::rand(t.sizes(), lazyx::is_floating(t.dtype()) ? t.dtype() : lazyx::kFloat32);
  if (to - from != 1.0) r = r.mul(to - from);
  if (from != 0.0) r = r.add(from);
  if (r.dtype() != t.dtype()) r = r.to(t.dtype());
  return assign(self, r, true);
}

Tensor& random_range(Tensor& self, int64_t from, int64_t to, optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::randint(from, to, t.sizes(), lazyx::kInt64);
  if (r.dtype() != t.dtype()) r = r.to(t.dtype());
  return assign(self, r, true);
}

Tensor& random_from(Tensor& self, int64_t from, optional<int64_t> to, optional<at::Generator> gen) {
  int64_t hi = to.has_value() ? *to : (int64_t{1} << 31) - 1;
  return random_range(self, from, hi, gen);
}
Tensor& random_to(Tensor& self, int64_t to, optional<at::Generator> gen) {
  return random_range(self, 0, to, gen);
}
Tensor& random_all(Tensor& self, optional<at::Generator> gen) {
  LT t = lz_impl(self)->tensor();
  int64_t hi = t.dtype() == lazyx::kFloat32 ? (int64_t{1} << 24) + 1
             : t.dtype() == lazyx::kFloat64 ? (int64_t{1} << 53) + 1
             : t.dtype() == lazyx::kBool ? 2 : (int64_t{1} << 31) - 1;
  return random_range(self, 0, hi, gen);
}

Tensor& bernoulli_float(Tensor& self, double p, optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::rand(t.sizes(), lazyx::kFloat32).lt(p).to(t.dtype());
  return assign(self, r, true);
}

// ---------------------------------------------------------------------------------------------
// Views: real views over the same lazyx storage.
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
Tensor as_strided_k(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                    optional<c10::SymInt> offset) {
  int64_t off = offset.has_value() ? offset->expect_int() : self.storage_offset();
  return wrap_view(as_strided(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride), off),
                   self);
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
  TORCH_CHECK(index >= -n && index < n, "[select] index ", index, " is out of bounds for dimension ",
              dim, " with size ", n);
  if (index < 0) index += n;
  return wrap_view(lz(self).select(dim, index), self);
}
Tensor slice(const Tensor& self, int64_t dim, optional<c10::SymInt> start, optional<c10::SymInt> end,
             c10::SymInt step) {
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
Tensor squeeze(const Tensor& self) { return wrap_view(lz(self).squeeze(), self); }
Tensor squeeze_dim(const Tensor& self, int64_t dim) {
  if (self.dim() == 0) return wrap_view(lz(self).view({}), self);
  return wrap_view(lz(self).squeeze(wrap_dim(dim, self.dim())), self);
}

// ---------------------------------------------------------------------------------------------
// Elementwise arithmetic. A 0-dim CPU tensor (a Python number) becomes a run-time scalar.
Tensor add_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).add(cpu_scalar(b), to_lz(alpha)));
  if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(lz(b).mul(to_lz(alpha)).add(cpu_scalar(a)));
  return wrap(is_one(alpha) ? lz(a).add(lz(b)) : lz(a).add(lz(b), to_lz(alpha)));
}
Tensor& add__t(Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  if (is_cpu_scalar(b)) t.add_(cpu_scalar(b), to_lz(alpha));
  else if (is_one(alpha)) t.add_(lz(b));
  else t.add_(lz(b), to_lz(alpha));
  return a;
}
Tensor add_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  return wrap(lz(a).add(to_lz(b), to_lz(alpha)));
}
Tensor& add__s(Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  t.add_(to_lz(b), to_lz(alpha));
  return a;
}
Tensor sub_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).sub(cpu_scalar(b), to_lz(alpha)));
  if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(cpu_scalar(a) - lz(b).mul(to_lz(alpha)));
  return wrap(is_one(alpha) ? lz(a).sub(lz(b)) : lz(a).sub(lz(b), to_lz(alpha)));
}
Tensor& sub__t(Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  if (is_cpu_scalar(b)) t.sub_(cpu_scalar(b), to_lz(alpha));
  else if (is_one(alpha)) t.sub_(lz(b));
  else t.sub_(lz(b), to_lz(alpha));
  return a;
}
Tensor sub_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  return wrap(lz(a).sub(to_lz(b), to_lz(alpha)));
}
Tensor& sub__s(Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT t = lz(a);
  t.sub_(to_lz(b), to_lz(alpha));
  return a;
}
// rsub(self, other, alpha) = other - alpha * self
Tensor rsub_t(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {
  LT x = is_one(alpha) ? lz(a) : lz(a).mul(to_lz(alpha));
  if (is_cpu_scalar(b)) return wrap(cpu_scalar(b) - x);
  return wrap(lz(b).sub(x));
}
Tensor rsub_s(const Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  LT x = is_one(alpha) ? lz(a) : lz(a).mul(to_lz(alpha));
  return wrap(to_lz(b) - x);
}

#define BINARY_TS(NAME, METHOD, OPERATOR)                                            \
  Tensor NAME##_t(const Tensor& a, const Tensor& b) {                                \
    if (is_cpu_scalar(b) && is_lazyx(a)) return wrap(lz(a).METHOD(cpu_scalar(b)));   \
    if (is_cpu_scalar(a) && is_lazyx(b)) return wrap(cpu_scalar(a) OPERATOR lz(b));  \
    return wrap(lz(a).METHOD(lz(b)));                                                \
  }                                                                                  \
  Tensor& NAME##__t(Tensor& a, const Tensor& b) {                                    \
    LT t = lz(a);                                                                    \
    if (is_cpu_scalar(b)) t.METHOD##_(cpu_scalar(b));                                \
    else t.METHOD##_(lz(b));                                                         \
    return a;                                                                        \
  }                                                                                  \
  Tensor NAME##_s(const Tensor& a, const c10::Scalar& b) { return wrap(lz(a).METHOD(to_lz(b))); } \
  Tensor& NAME##__s(Tensor& a, const c10::Scalar& b) {                               \
    LT t = lz(a);                                                                    \
    t.METHOD##_(to_lz(b));                                                           \
    return a;                                                                        \
  }
BINARY_TS(mul, mul, *)
BINARY_TS(div, div, /)
#undef BINARY_TS

Tensor pow_ts(const Tensor& a, const c10::Scalar& e) { return wrap(lz(a).pow(to_lz(e))); }
Tensor pow_tt(const Tensor& a, const Tensor& e) {
  if (is_cpu_scalar(e)) return wrap(lz(a).pow(cpu_scalar(e)));
  return wrap(lz(a).pow(lz(e)));
}
Tensor& pow__s(Tensor& a, const c10::Scalar& e) {
  LT t = lz(a);
  t.pow_(to_lz(e));
  return a;
}

LT operand(const Tensor& t, const LT& like) {
  if (is_cpu_scalar(t)) return lazyx::full({}, cpu_scalar(t), like.dtype());
  return lz(t);
}

Tensor maximum(const Tensor& a, const Tensor& b) { return wrap(lazyx::maximum(lz(a), operand(b, lz(a)))); }
Tensor minimum(const Tensor& a, const Tensor& b) { return wrap(lazyx::minimum(lz(a), operand(b, lz(a)))); }
Tensor& maximum_out(const Tensor& a, const Tensor& b, Tensor& out) {
  LT r = lazyx::maximum(lz(a), operand(b, lz(a)));
  LT o = lz(out);
  o.copy_(r);
  return out;
}
Tensor& minimum_out(const Tensor& a, const Tensor& b, Tensor& out) {
  LT r = lazyx::minimum(lz(a), operand(b, lz(a)));
  LT o = lz(out);
  o.copy_(r);
  return out;
}
std::optional<lazyx::Scalar> opt(const optional<c10::Scalar>& s) {
  if (!s.has_value()) return std::nullopt;
  return to_lz(*s);
}
Tensor clamp(const Tensor& a, const optional<c10::Scalar>& lo, const optional<c10::Scalar>& hi) {
  return wrap(lz(a).clamp(opt(lo), opt(hi)));
}
Tensor& clamp_(Tensor& a, const optional<c10::Scalar>& lo, const optional<c10::Scalar>& hi) {
  LT t = lz(a);
  t.clamp_(opt(lo), opt(hi));
  return a;
}
Tensor clamp_min(const Tensor& a, const c10::Scalar& lo) { return wrap(lz(a).clamp(to_lz(lo), std::nullopt)); }
Tensor clamp_max(const Tensor& a, const c10::Scalar& hi) { return wrap(lz(a).clamp(std::nullopt, to_lz(hi))); }
Tensor& clamp_min_(Tensor& a, const c10::Scalar& lo) {
  LT t = lz(a);
  t.clamp_(to_lz(lo), std::nullopt);
  return a;
}

Tensor where_self(const Tensor& c, const Tensor& a, const Tensor& b) {
  if (is_cpu_scalar(a) && !is_cpu_scalar(b)) return wrap(lazyx::where(lz(c), cpu_scalar(a), lz(b)));
  if (is_cpu_scalar(b) && !is_cpu_scalar(a)) return wrap(lazyx::where(lz(c), lz(a), cpu_scalar(b)));
  return wrap(lazyx::where(lz(c), lz(a), lz(b)));
}

Tensor addcmul(const Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  return wrap(lz(s).add(lz(t1).mul(lz(t2)), to_lz(v)));
}
Tensor& addcmul_(Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  LT t = lz(s);
  t.add_(lz(t1).mul(lz(t2)), to_lz(v));
  return s;
}
Tensor addcdiv(const Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  return wrap(lz(s).add(lz(t1).div(lz(t2)), to_lz(v)));
}
Tensor& addcdiv_(Tensor& s, const Tensor& t1, const Tensor& t2, const c10::Scalar& v) {
  LT t = lz(s);
  t.add_(lz(t1).div(lz(t2)), to_lz(v));
  return s;
}
Tensor lerp_s(const Tensor& s, const Tensor& e, const c10::Scalar& w) {
  LT a = lz(s);
  return wrap(a.add(lz(e).sub(a), to_lz(w)));
}
Tensor& lerp__s(Tensor& s, const Tensor& e, const c10::Scalar& w) {
  LT a = lz(s);
  a.add_(lz(e).sub(a), to_lz(w));
  return s;
}

#define UNARY(NAME)                                                        \
  Tensor NAME(const Tensor& a) { return wrap(lz(a).NAME()); }              \
  Tensor& NAME##_(Tensor& a) {                                             \
    LT t = lz(a);                                                          \
    t.NAME##_();                                                           \
    return a;                                                              \
  }
UNARY(neg)
UNARY(abs)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(rsqrt)
UNARY(tanh)
UNARY(sigmoid)
UNARY(relu)
UNARY(sin)
UNARY(cos)
#undef UNARY
Tensor logical_not(const Tensor& a) { return wrap(lz(a).logical_not()); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return wrap(lz(a).to(lazyx::kBool).logical_and(lz(b).to(lazyx::kBool))); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return wrap(lz(a).to(lazyx::kBool).logical_or(lz(b).to(lazyx::kBool))); }
Tensor silu(const Tensor& a) { LT x = lz(a); return wrap(x.mul(x.sigmoid())); }
Tensor silu_backward(const Tensor& g, const Tensor& a) {
  LT x = lz(a);
  LT s = x.sigmoid();
  return wrap(lz(g).mul(s.mul(x.mul(s.neg().add(1.0)).add(1.0))));
}

#define COMPARE(NAME)                                                                    \
  Tensor NAME##_s(const Tensor& a, const c10::Scalar& b) { return wrap(lz(a).NAME(to_lz(b))); } \
  Tensor NAME##_t(const Tensor& a, const Tensor& b) {                                    \
    if (is_cpu_scalar(b)) return wrap(lz(a).NAME(cpu_scalar(b)));                       \
    return wrap(lz(a).NAME(lz(b)));                                                      \
  }
COMPARE(eq)
COMPARE(ne)
COMPARE(lt)
COMPARE(le)
COMPARE(gt)
COMPARE(ge)
#undef COMPARE

// Activations and their backward ops.
Tensor gelu(const Tensor& a, c10::string_view approximate) {
  return wrap(lz(a).gelu(approximate == "tanh"));
}
Tensor gelu_backward(const Tensor& grad, const Tensor& self, c10::string_view approximate) {
  LT x = lz(self), g = lz(grad);
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    LT x2 = x.mul(x);
    LT inner = x.add(x2.mul(x), c).mul(k);
    LT t = inner.tanh();
    LT left_d = t.add(1.0).mul(0.5);
    LT inner_d = x2.mul(3.0 * c).add(1.0).mul(k);
    LT right_d = x.mul(0.5).mul(t.mul(t).neg().add(1.0)).mul(inner_d);
    return wrap(g.mul(left_d.add(right_d)));
  }
  // d/dx x*Phi(x) = Phi(x) + x*phi(x); Phi(x) = gelu(x)/x (0.5 at x = 0).
  LT cdf = lazyx::where(x.eq(0.0), lazyx::Scalar(0.5), x.gelu(false).div(x));
  LT pdf = x.mul(x).mul(-0.5).exp().mul(1.0 / std::sqrt(2.0 * M_PI));
  return wrap(g.mul(cdf.add(x.mul(pdf))));
}
Tensor threshold_backward(const Tensor& grad, const Tensor& self, const c10::Scalar& th) {
  return wrap(lazyx::where(lz(self).le(to_lz(th)), lazyx::Scalar(0.0), lz(grad)));
}
Tensor sigmoid_backward(const Tensor& grad, const Tensor& out) {
  LT y = lz(out);
  return wrap(lz(grad).mul(y.mul(y.neg().add(1.0))));
}
Tensor tanh_backward(const Tensor& grad, const Tensor& out) {
  LT y = lz(out);
  return wrap(lz(grad).mul(y.mul(y).neg().add(1.0)));
}

// ---------------------------------------------------------------------------------------------
// Reductions.
LT sum_input(const Tensor& a, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value()) return x.dtype() == to_lz(*dtype) ? x : x.to(to_lz(*dtype));
  if (!lazyx::is_floating(x.dtype()) && x.dtype() != lazyx::kInt64) return x.to(lazyx::kInt64);
  return x;
}
std::vector<int64_t> opt_dims(at::OptionalIntArrayRef dim) {
  if (!dim.has_value()) return {};
  return to_dims(*dim);
}
Tensor sum(const Tensor& a, optional<c10::ScalarType> dtype) { return wrap(sum_input(a, dtype).sum()); }
Tensor sum_dim(const Tensor& a, at::OptionalIntArrayRef dim, bool keepdim, optional<c10::ScalarType> dtype) {
  if (a.dim() == 0) return wrap(sum_input(a, dtype).clone());
  return wrap(sum_input(a, dtype).sum(opt_dims(dim), keepdim));
}
Tensor mean(const Tensor& a, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  return wrap(x.mean());
}
Tensor mean_dim(const Tensor& a, at::OptionalIntArrayRef dim, bool keepdim, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  if (a.dim() == 0) return wrap(x.clone());
  return wrap(x.mean(opt_dims(dim), keepdim));
}
Tensor amax(const Tensor& a, c10::IntArrayRef dim, bool keepdim) { return wrap(lz(a).amax(to_dims(dim), keepdim)); }
Tensor amin(const Tensor& a, c10::IntArrayRef dim, bool keepdim) { return wrap(lz(a).amin(to_dims(dim), keepdim)); }
Tensor max_all(const Tensor& a) { return wrap(lz(a).amax()); }
Tensor min_all(const Tensor& a) { return wrap(lz(a).amin()); }
std::tuple<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim) {
  LT x = lz(a);
  return {wrap(x.amax({dim}, keepdim)), wrap(x.argmax(dim, keepdim))};
}
Tensor argmax(const Tensor& a, optional<int64_t> dim, bool keepdim) {
  return wrap(lz(a).argmax(dim.has_value() ? std::optional<int64_t>(*dim) : std::nullopt, keepdim));
}
Tensor logsumexp(const Tensor& a, c10::IntArrayRef dim, bool keepdim) {
  return wrap(lz(a).logsumexp(to_dims(dim), keepdim));
}

// Vector norms (clip_grad_norm_ calls these every step, so they must not fall back).
LT vector_norm(LT x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);
  if (p == 2.0) return x.mul(x).sum(dims, keepdim).sqrt();
  if (p == 1.0) return x.abs().sum(dims, keepdim);
  if (std::isinf(p)) return p > 0 ? x.abs().amax(dims, keepdim) : x.abs().amin(dims, keepdim);
  if (p == 0.0) return x.ne(0.0).to(x.dtype()).sum(dims, keepdim);
  return x.abs().pow(p).sum(dims, keepdim).pow(1.0 / p);
}
Tensor norm_scalar(const Tensor& a, const c10::Scalar& p) {
  return wrap(vector_norm(lz(a), p.toDouble(), {}, false));
}
Tensor norm_opt_dim(const Tensor& a, const optional<c10::Scalar>& p, c10::IntArrayRef dim, bool keepdim) {
  return wrap(vector_norm(lz(a), p.has_value() ? p->toDouble() : 2.0, to_dims(dim), keepdim));
}
Tensor linalg_vector_norm(const Tensor& a, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                          bool keepdim, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  return wrap(vector_norm(x, ord.toDouble(), opt_dims(dim), keepdim));
}
LT var_impl(const Tensor& a, at::OptionalIntArrayRef dim, optional<int64_t> correction, bool keepdim) {
  LT x = lz(a);
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);
  std::vector<int64_t> dims = opt_dims(dim);
  int64_t n = 1;
  if (dims.empty()) {
    n = a.numel();
  } else {
    for (int64_t d : dims) n *= a.size(wrap_dim(d, a.dim()));
  }
  LT xc = x.sub(x.mean(dims, true));
  const double denom = std::max<double>(0.0, static_cast<double>(n - correction.value_or(1)));
  return xc.mul(xc).sum(dims, keepdim).div(denom);
}
Tensor var_k(const Tensor& a, at::OptionalIntArrayRef dim, optional<int64_t> correction, bool keepdim) {
  return wrap(var_impl(a, dim, correction, keepdim));
}
Tensor std_k(const Tensor& a, at::OptionalIntArrayRef dim, optional<int64_t> correction, bool keepdim) {
  return wrap(var_impl(a, dim, correction, keepdim).sqrt());
}
Tensor sign_k(const Tensor& a) {
  LT x = lz(a);
  if (x.dtype() == lazyx::kBool) return wrap(x.clone());
  return wrap(x.gt(0).to(x.dtype()).sub(x.lt(0).to(x.dtype())));
}
Tensor isnan_k(const Tensor& a) { LT x = lz(a); return wrap(x.ne(x)); }
Tensor all_k(const Tensor& a) { return wrap(lz(a).ne(0).to(lazyx::kInt32).amin().to(lazyx::kBool)); }
Tensor any_k(const Tensor& a) { return wrap(lz(a).ne(0).to(lazyx::kInt32).amax().to(lazyx::kBool)); }
Tensor reciprocal(const Tensor& a) {
  LT x = lz(a);
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);
  return wrap(lazyx::Scalar(1.0) / x);
}
Tensor& reciprocal_(Tensor& a) {
  LT t = lz(a);
  t.copy_(lazyx::Scalar(1.0) / t);
  return a;
}

Tensor _softmax(const Tensor& a, int64_t dim, bool) { return wrap(lz(a).softmax(dim)); }
Tensor _log_softmax(const Tensor& a, int64_t dim, bool) { return wrap(lz(a).log_softmax(dim)); }
Tensor _softmax_backward_data(const Tensor& grad, const Tensor& out, int64_t dim, c10::ScalarType) {
  LT g = lz(grad), y = lz(out);
  return wrap(y.mul(g.sub(g.mul(y).sum({dim}, true))));
}
Tensor _log_softmax_backward_data(const Tensor& grad, const Tensor& out, int64_t dim, c10::ScalarType) {
  LT g = lz(grad), y = lz(out);
  return wrap(g.sub(y.exp().mul(g.sum({dim}, true))));
}

// ---------------------------------------------------------------------------------------------
// Linear algebra.
Tensor mm(const Tensor& a, const Tensor& b) { return wrap(lazyx::mm(lz(a), lz(b))); }
Tensor bmm(const Tensor& a, const Tensor& b) { return wrap(lazyx::bmm(lz(a), lz(b))); }
Tensor addmm(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  return wrap(lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha)));
}
Tensor& addmm_out(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  LT r = lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha));
  return assign(out, r, true);
}
Tensor& mm_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return assign(out, lazyx::mm(lz(a), lz(b)), true);
}
Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, Tensor& out) {
  LzTensorImpl* impl = lz_impl(out);
  LT r = lazyx::arange(to_lz(start), to_lz(end), to_lz(step), impl->tensor().dtype());
  if (r.sizes() != impl->tensor().sizes()) {
    impl->set_tensor(r, c10::Storage(c10::make_intrusive<LzStorage>(r)));
    impl->set_fresh(false);
    return out;
  }
  return assign(out, r, true);
}
Tensor dot(const Tensor& a, const Tensor& b) { return wrap(lz(a).mul(lz(b)).sum()); }
Tensor mv(const Tensor& a, const Tensor& v) { return wrap(lazyx::matmul(lz(a), lz(v))); }

// ---------------------------------------------------------------------------------------------
// Losses. reduction: 0 none, 1 mean, 2 sum.
std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target,
                                            const optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  LT x = lz(self), t = lz(target);
  const bool batched = x.dim() == 2;
  if (!batched) {
    x = x.unsqueeze(0);
    t = t.unsqueeze(0);
  }
  LT valid = t.ne(ignore_index);
  LT tsafe = lazyx::where(valid, t, lazyx::Scalar(0LL));
  LT picked = x.gather(1, tsafe.unsqueeze(1)).squeeze(1);
  LT w = valid.to(x.dtype());
  if (weight.has_value() && weight->defined()) w = w.mul(lz(*weight).index_select(0, tsafe));
  LT loss = picked.mul(w).neg();
  LT total = w.sum();
  if (reduction == 0) return {wrap(batched ? loss : loss.squeeze(0).clone()), wrap(total)};
  if (reduction == 2) return {wrap(loss.sum()), wrap(total)};
  return {wrap(loss.sum().div(total)), wrap(total)};
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight) {
  LT x = lz(self), t = lz(target), g = lz(grad_output);
  const bool batched = x.dim() == 2;
  if (!batched) {
    x = x.unsqueeze(0);
    t = t.unsqueeze(0);
    if (reduction == 0) g = g.reshape({1});
  }
  LT valid = t.ne(ignore_index);
  LT tsafe = lazyx::where(valid, t, lazyx::Scalar(0LL));
  LT w = valid.to(x.dtype());
  if (weight.has_value() && weight->defined()) w = w.mul(lz(*weight).index_select(0, tsafe));
  LT coef = w.neg().mul(g);  // g: [] for mean/sum, [N] for none
  if (reduction == 1) coef = coef.div(lz(total_weight));
  LT gi = lazyx::zeros(x.sizes(), x.dtype()).scatter(1, tsafe.unsqueeze(1), coef.unsqueeze(1));
  if (!batched) gi = gi.squeeze(0).clone();
  return wrap(gi);
}

Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  LT d = lz(self).sub(operand(target, lz(self)));
  LT sq = d.mul(d);
  if (reduction == 0) return wrap(sq);
  if (reduction == 2) return wrap(sq.sum());
  return wrap(sq.mean());
}
Tensor mse_loss_backward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  LT d = lz(self).sub(operand(target, lz(self)));
  double scale = reduction == 1 ? 2.0 / static_cast<double>(std::max<int64_t>(1, self.numel())) : 2.0;
  return wrap(d.mul(scale).mul(lz(grad)));
}

// Layer norm over the trailing normalized_shape dims; mean and rstd keep those dims as size 1.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, c10::SymIntArrayRef nshape,
                                                     const optional<Tensor>& weight,
                                                     const optional<Tensor>& bias, double eps) {
  LT x = lz(input);
  const int64_t nd = static_cast<int64_t>(nshape.size()), axis = x.dim() - nd;
  std::vector<int64_t> dims;
  for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
  LT mu = x.mean(dims, true);
  LT xc = x.sub(mu);
  LT var = xc.mul(xc).mean(dims, true);
  LT rstd = var.add(eps).rsqrt();
  LT out = xc.mul(rstd);
  if (weight.has_value() && weight->defined()) out = out.mul(lz(*weight));
  if (bias.has_value() && bias->defined()) out = out.add(lz(*bias));
  return {wrap(out), wrap(mu), wrap(rstd)};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, c10::SymIntArrayRef nshape, const Tensor& mean,
    const Tensor& rstd, const optional<Tensor>& weight, const optional<Tensor>& bias,
    std::array<bool, 3> mask) {
  LT x = lz(input), g = lz(grad_out), mu = lz(mean), rs = lz(rstd);
  const int64_t nd = static_cast<int64_t>(nshape.size()), axis = x.dim() - nd;
  std::vector<int64_t> dims, lead;
  for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
  for (int64_t d = 0; d < axis; ++d) lead.push_back(d);
  LT xhat = x.sub(mu).mul(rs);
  Tensor dx, dw, db;
  if (mask[0]) {
    LT gw = (weight.has_value() && weight->defined()) ? g.mul(lz(*weight)) : g;
    LT r = gw.sub(gw.mean(dims, true)).sub(xhat.mul(gw.mul(xhat).mean(dims, true))).mul(rs);
    dx = wrap(r);
  }
  if (mask[1] && weight.has_value() && weight->defined()) {
    LT p = g.mul(xhat);
    dw = wrap(lead.empty() ? p : p.sum(lead));
  }
  if (mask[2] && bias.has_value() && bias->defined()) {
    db = wrap(lead.empty() ? g.clone() : g.sum(lead));
  }
  return {dx, dw, db};
}

// ---------------------------------------------------------------------------------------------
// Indexing.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  return wrap(lz(self).index_select(wrap_dim(dim, self.dim()), lz(index)));
}
Tensor& index_copy_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  LT t = lz(self);
  t.index_copy_(wrap_dim(dim, self.dim()), lz(index), lz(source));
  return self;
}
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  return wrap(lz(self).index_copy(wrap_dim(dim, self.dim()), lz(index), lz(source)));
}
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool) {
  return wrap(lz(self).gather(wrap_dim(dim, self.dim()), lz(index)));
}
Tensor scatter_src(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return wrap(lz(self).scatter(wrap_dim(dim, self.dim()), lz(index), lz(src)));
}
Tensor& scatter__src(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT t = lz(self);
  t.scatter_(wrap_dim(dim, self.dim()), lz(index), lz(src));
  return self;
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return wrap(lz(self).scatter_add(wrap_dim(dim, self.dim()), lz(index), lz(src)));
}
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  LT t = lz(self);
  t.scatter_add_(wrap_dim(dim, self.dim()), lz(index), lz(src));
  return self;
}
Tensor masked_fill_s(const Tensor& self, const Tensor& mask, const c10::Scalar& v) {
  return wrap(lz(self).masked_fill(lz(mask), to_lz(v)));
}
Tensor& masked_fill__s(Tensor& self, const Tensor& mask, const c10::Scalar& v) {
  LT t = lz(self);
  t.masked_fill_(lz(mask), to_lz(v));
  return self;
}
Tensor& masked_fill__t(Tensor& self, const Tensor& mask, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "[masked_fill_] value must be a 0-dim tensor.");
  c10::Scalar s = is_cpu_scalar(v) ? to_at_scalar(cpu_scalar(v)) : v.item();
  return masked_fill__s(self, mask, s);
}

void lazyx_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Integer index tensors in leading positions map to lazyx's index_put_; other patterns (bool
// masks, None before an index) go to the CPU fallback.
bool simple_indices(const c10::List<optional<Tensor>>& indices) {
  if (indices.size() == 0) return false;
  for (size_t i = 0; i < indices.size(); ++i) {
    const optional<Tensor> ix = indices.get(i);
    if (!ix.has_value() || !ix->defined()) return false;
    c10::ScalarType st = ix->scalar_type();
    if (st != at::kLong && st != at::kInt) return false;
  }
  return true;
}

// The indices on CPU, for a manual fallback (cpu_fallback does not move lists of optional
// tensors in torch 1.13).
c10::List<optional<Tensor>> cpu_indices(const c10::List<optional<Tensor>>& indices) {
  c10::List<optional<Tensor>> out;
  for (size_t i = 0; i < indices.size(); ++i) {
    const optional<Tensor> ix = indices.get(i);
    out.push_back(ix.has_value() && ix->defined() ? optional<Tensor>(ix->cpu()) : optional<Tensor>());
  }
  return out;
}

bool is_mask(const Tensor& t) { return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte; }

// A single bool mask of self's shape.
bool full_mask(const Tensor& self, const c10::List<optional<Tensor>>& indices) {
  if (indices.size() != 1) return false;
  const optional<Tensor> ix = indices.get(0);
  return ix.has_value() && ix->defined() && is_mask(*ix) && ix->sizes() == self.sizes();
}

Tensor& index_put_impl_(Tensor& self, const c10::List<optional<Tensor>>& indices, const Tensor& values,
                        bool accumulate, bool unsafe) {
  if (simple_indices(indices)) {
    std::vector<LT> ix;
    for (size_t i = 0; i < indices.size(); ++i) ix.push_back(lz(*indices.get(i)));
    LT t = lz(self);
    LT v = is_cpu_scalar(values) ? lazyx::full({}, cpu_scalar(values), t.dtype()) : lz(values);
    t.index_put_(ix, v, accumulate);
    return self;
  }
  if (full_mask(self, indices) && values.numel() == 1 && !accumulate) {
    // t[mask] = v: a where over the whole tensor, no sync needed.
    LT t = lz(self);
    LT m = lz(*indices.get(0)).to(lazyx::kBool);
    LT v = is_cpu_scalar(values) ? lazyx::full({}, cpu_scalar(values), t.dtype())
                                 : lz(values).reshape({}).to(t.dtype());
    t.copy_(lazyx::where(m, v, t));
    return self;
  }
  lazyx::metrics::add_counter("aten::_index_put_impl_");
  Tensor c = self.cpu();
  at::_ops::_index_put_impl_::call(c, cpu_indices(indices), values.cpu(), accumulate, unsafe);
  copy_impl(self, c);
  return self;
}

Tensor index_tensor(const Tensor& self, const c10::List<optional<Tensor>>& indices) {
  if (indices.size() == 1 && simple_indices(indices)) {
    const Tensor ix = *indices.get(0);
    LT i = lz(ix);
    LT r = lz(self).index_select(0, ix.dim() == 1 ? i : i.reshape({-1}));
    if (ix.dim() != 1) {
      Shape s = to_shape(ix.sizes());
      for (int64_t d = 1; d < self.dim(); ++d) s.push_back(self.size(d));
      r = r.reshape(s);
      if (r.is_view()) r = r.clone();
    }
    return wrap(r);
  }
  if (full_mask(self, indices)) {
    // t[mask]: the result's size depends on the mask's values, so the mask is read (a partial
    // sync of the mask only); the gather itself stays on the device.
    Tensor where_true = indices.get(0)->cpu().reshape({-1}).nonzero().reshape({-1});
    return wrap(lz(self).reshape({-1}).index_select(0, upload(where_true)));
  }
  lazyx::metrics::add_counter("aten::index");
  return at::_ops::index_Tensor::call(self.cpu(), cpu_indices(indices)).to(self.device());
}

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, c10::SymInt num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  TORCH_CHECK(!scale_grad_by_freq, "[embedding] scale_grad_by_freq is not supported on the lazyx device.");
  LT idx = lz(indices).reshape({-1});
  const int64_t D = grad.size(-1);
  LT g = lz(grad).reshape({-1, D});
  if (padding_idx >= 0) g = g.mul(idx.ne(padding_idx).to(g.dtype()).unsqueeze(1));
  LT out = lazyx::zeros({num_weights.expect_int(), D}, g.dtype());
  out.index_put_({idx}, g, true);
  return wrap(out);
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<LT> ts;
  int64_t nd = -1;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // legacy empty tensors
    ts.push_back(lz(t));
    nd = t.dim();
  }
  TORCH_CHECK(!ts.empty(), "[cat] expected a non-empty list of tensors.");
  return wrap(lazyx::cat(ts, wrap_dim(dim, nd)));
}

// ---------------------------------------------------------------------------------------------
// The fallback: run on CPU, count per op.
// torch 1.13's cpu_fallback does not write mutated tensor lists back (the _foreach_* ops of
// foreach optimizers), so those take this path: move every tensor and tensor list to CPU, run
// the op there, copy mutated arguments back into the device tensors (keeping their identity) and
// move returned tensors to the device.
void tensor_list_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t n = args.size();
  auto first = stack->end() - static_cast<std::ptrdiff_t>(n);
  std::vector<c10::IValue> orig(first, stack->end());
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = *(first + static_cast<std::ptrdiff_t>(i));
    if (v.isTensor() && is_lazyx(v.toTensor())) {
      v = v.toTensor().cpu();
    } else if (v.isTensorList()) {
      std::vector<Tensor> l;
      for (const Tensor& t : v.toTensorVector()) l.push_back(is_lazyx(t) ? t.cpu() : t);
      v = c10::IValue(l);
    }
  }
  std::vector<c10::IValue> moved(first, stack->end());
  op.callBoxed(stack);
  for (size_t i = 0; i < n; ++i) {
    const c10::AliasInfo* ai = args[i].alias_info();
    if (ai == nullptr || !ai->isWrite()) continue;
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
  const size_t nret = op.schema().returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(nret); it != stack->end(); ++it) {
    if (it->isTensor() && it->toTensor().defined() && it->toTensor().device().is_cpu()) {
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
  if (ov == "List") overloads = {"Tensor", ""};
  else if (ov == "Scalar" || ov == "ScalarList" || ov == "Tensor") overloads = {"Scalar", ""};
  else overloads = {"", "Scalar"};
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

void tensor_list_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

void foreach_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorHandle* target = foreach_target(op);
  if (target == nullptr) {
    lazyx::metrics::add_counter(op.schema().name());
    tensor_list_fallback(op, stack);
    return;
  }
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> src(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  torch::jit::drop(*stack, n);
  const size_t count = src[0].toTensorVector().size();
  const auto& targs = target->schema().arguments();
  std::vector<Tensor> results;
  for (size_t i = 0; i < count; ++i) {
    torch::jit::Stack s;
    for (size_t j = 0; j < targs.size(); ++j) {
      if (j >= n) {
        s.push_back(*targs[j].default_value());
        continue;
      }
      const c10::IValue& v = src[j];
      const bool wants_scalar = targs[j].type()->kind() == c10::TypeKind::NumberType;
      if (v.isTensorList()) {
        s.push_back(v.toTensorVector()[i]);
      } else if (v.isList()) {
        s.push_back(v.toListRef()[i]);
      } else if (v.isDoubleList()) {
        s.push_back(v.toDoubleVector()[i]);
      } else if (v.isIntList()) {
        s.push_back(v.toIntVector()[i]);
      } else if (wants_scalar && v.isTensor()) {
        s.push_back(v.toTensor().cpu().reshape({-1})[static_cast<int64_t>(i)].item());
      } else {
        s.push_back(v);
      }
    }
    target->callBoxed(&s);
    const bool copy_back = op.schema().name().back() == '_' && target->schema().name().back() != '_';
    if (copy_back) {
      Tensor self_i = src[0].toTensorVector()[i];
      copy_impl(self_i, s.back().toTensor());
    } else if (!op.schema().returns().empty() && !s.empty() && s.back().isTensor()) {
      results.push_back(s.back().toTensor());
    }
  }
  if (!op.schema().returns().empty()) stack->push_back(c10::IValue(results));
}

void lazyx_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  lazyx::metrics::add_counter(op.schema().name());
  for (const auto& a : op.schema().arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite() &&
        a.type()->kind() == c10::TypeKind::ListType) {
      tensor_list_fallback(op, stack);
      return;
    }
  }
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&lazyx_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Creation, copies, random numbers.
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("clone", TORCH_FN(clone));
  m.impl("_local_scalar_dense", TORCH_FN(_local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_all));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  // Views.
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(_reshape_alias));
  m.impl("_unsafe_view", TORCH_FN(_unsafe_view));
  m.impl("alias", TORCH_FN(alias));
  m.impl("as_strided", TORCH_FN(as_strided_k));
  m.impl("transpose.int", TORCH_FN(transpose));
  m.impl("permute", TORCH_FN(permute));
  m.impl("expand", TORCH_FN(expand));
  m.impl("select.int", TORCH_FN(select));
  m.impl("slice.Tensor", TORCH_FN(slice));
  m.impl("unsqueeze", TORCH_FN(unsqueeze));
  m.impl("squeeze", TORCH_FN(squeeze));
  m.impl("squeeze.dim", TORCH_FN(squeeze_dim));
  // Elementwise.
  m.impl("add.Tensor", TORCH_FN(add_t));
  m.impl("add_.Tensor", TORCH_FN(add__t));
  m.impl("add.Scalar", TORCH_FN(add_s));
  m.impl("add_.Scalar", TORCH_FN(add__s));
  m.impl("sub.Tensor", TORCH_FN(sub_t));
  m.impl("sub_.Tensor", TORCH_FN(sub__t));
  m.impl("sub.Scalar", TORCH_FN(sub_s));
  m.impl("sub_.Scalar", TORCH_FN(sub__s));
  m.impl("rsub.Tensor", TORCH_FN(rsub_t));
  m.impl("rsub.Scalar", TORCH_FN(rsub_s));
  m.impl("mul.Tensor", TORCH_FN(mul_t));
  m.impl("mul_.Tensor", TORCH_FN(mul__t));
  m.impl("mul.Scalar", TORCH_FN(mul_s));
  m.impl("mul_.Scalar", TORCH_FN(mul__s));
  m.impl("div.Tensor", TORCH_FN(div_t));
  m.impl("div_.Tensor", TORCH_FN(div__t));
  m.impl("div.Scalar", TORCH_FN(div_s));
  m.impl("div_.Scalar", TORCH_FN(div__s));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_ts));
  m.impl("pow.Tensor_Tensor", TORCH_FN(pow_tt));
  m.impl("pow_.Scalar", TORCH_FN(pow__s));
  m.impl("maximum", TORCH_FN(maximum));
  m.impl("minimum", TORCH_FN(minimum));
  m.impl("maximum.out", TORCH_FN(maximum_out));
  m.impl("minimum.out", TORCH_FN(minimum_out));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp_", TORCH_FN(clamp_));
  m.impl("clamp_min", TORCH_FN(clamp_min));
  m.impl("clamp_max", TORCH_FN(clamp_max));
  m.impl("clamp_min_", TORCH_FN(clamp_min_));
  m.impl("where.self", TORCH_FN(where_self));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("lerp.Scalar", TORCH_FN(lerp_s));
  m.impl("lerp_.Scalar", TORCH_FN(lerp__s));
#define REG_UNARY(NAME)                    \
  m.impl(#NAME, TORCH_FN(NAME));           \
  m.impl(#NAME "_", TORCH_FN(NAME##_));
  REG_UNARY(neg)
  REG_UNARY(abs)
  REG_UNARY(exp)
  REG_UNARY(log)
  REG_UNARY(sqrt)
  REG_UNARY(rsqrt)
  REG_UNARY(tanh)
  REG_UNARY(sigmoid)
  REG_UNARY(relu)
  REG_UNARY(sin)
  REG_UNARY(cos)
#undef REG_UNARY
  m.impl("logical_not", TORCH_FN(logical_not));
  m.impl("logical_and", TORCH_FN(logical_and));
  m.impl("logical_or", TORCH_FN(logical_or));
  m.impl("silu", TORCH_FN(silu));
  m.impl("silu_backward", TORCH_FN(silu_backward));
#define REG_CMP(NAME)                                 \
  m.impl(#NAME ".Scalar", TORCH_FN(NAME##_s));        \
  m.impl(#NAME ".Tensor", TORCH_FN(NAME##_t));
  REG_CMP(eq)
  REG_CMP(ne)
  REG_CMP(lt)
  REG_CMP(le)
  REG_CMP(gt)
  REG_CMP(ge)
#undef REG_CMP
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
  m.impl("sigmoid_backward", TORCH_FN(sigmoid_backward));
  m.impl("tanh_backward", TORCH_FN(tanh_backward));
  // Reductions.
  m.impl("sum", TORCH_FN(sum));
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("mean", TORCH_FN(mean));
  m.impl("mean.dim", TORCH_FN(mean_dim));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amin", TORCH_FN(amin));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("max.dim", TORCH_FN(max_dim));
  m.impl("argmax", TORCH_FN(argmax));
  m.impl("logsumexp", TORCH_FN(logsumexp));
  m.impl("norm.Scalar", TORCH_FN(norm_scalar));
  m.impl("norm.ScalarOpt_dim", TORCH_FN(norm_opt_dim));
  m.impl("linalg_vector_norm", TORCH_FN(linalg_vector_norm));
  m.impl("all", TORCH_FN(all_k));
  m.impl("var.correction", TORCH_FN(var_k));
  m.impl("std.correction", TORCH_FN(std_k));
  m.impl("sign", TORCH_FN(sign_k));
  m.impl("sgn", TORCH_FN(sign_k));
  m.impl("isnan", TORCH_FN(isnan_k));
  m.impl("any", TORCH_FN(any_k));
  m.impl("reciprocal", TORCH_FN(reciprocal));
  m.impl("reciprocal_", TORCH_FN(reciprocal_));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("_softmax", TORCH_FN(_softmax));
  m.impl("_log_softmax", TORCH_FN(_log_softmax));
  m.impl("_softmax_backward_data", TORCH_FN(_softmax_backward_data));
  m.impl("_log_softmax_backward_data", TORCH_FN(_log_softmax_backward_data));
  // Linear algebra.
  m.impl("mm", TORCH_FN(mm));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("dot", TORCH_FN(dot));
  m.impl("mv", TORCH_FN(mv));
  // Losses and normalization.
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("mse_loss", TORCH_FN(mse_loss));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  // Indexing.
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_copy_", TORCH_FN(index_copy_));
  m.impl("index_copy", TORCH_FN(index_copy));
  m.impl("gather", TORCH_FN(gather));
  m.impl("scatter.src", TORCH_FN(scatter_src));
  m.impl("scatter_.src", TORCH_FN(scatter__src));
  m.impl("scatter_add", TORCH_FN(scatter_add));
  m.impl("scatter_add_", TORCH_FN(scatter_add_));
  m.impl("masked_fill.Scalar", TORCH_FN(masked_fill_s));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill__s));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill__t));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl_));
  m.impl("index.Tensor", TORCH_FN(index_tensor));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("cat", TORCH_FN(cat));
}

}  // namespace
// Registers foreach_kernel for every aten::_foreach_* op (called when the module loads).
void register_foreach_kernels() {
  static torch::Library* lib = nullptr;
  if (lib != nullptr) return;
  lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
    std::string full = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_kernel>());
  }
}

}  // namespace lazyx_bridge
