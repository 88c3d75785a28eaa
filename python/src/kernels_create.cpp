// Kernels: creation, copies between the host and the device, fills and random numbers.
#include <torch/library.h>

#include <cmath>

#include "diag_bridge.h"
#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

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
  TORCH_CHECK(is_lazyx(src),
              "[lazyx] copy_ between two non-lazyx tensors reached the lazyx device.");
  at::Tensor c = download(lz(src));
  dst.copy_(c);
}

void check_written(const Tensor& t) {
  TORCH_CHECK(!t.defined() || is_lazyx(t),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              device(), " and ", t.device(), "! ([lazyx] an op writes into a tensor on ",
              t.device(),
              " from operands on the lazyx device; move it with .to(lazyx.device()) "
              "or the operands with .cpu())");
}

namespace {

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

// copy_ writes CPU tensors too (device to host): registered without check_written.
Tensor& copy_(Tensor& self, const Tensor& src, bool) {
  try {
    copy_impl(self, src);
  } catch (const lazyx::Error& e) {
    rethrow_op_error(e);
  }
  return self;
}

Tensor _copy_from(const Tensor& self, const Tensor& dst, bool) {
  copy_impl(dst, self);
  return dst;
}

Tensor _copy_from_and_resize(const Tensor& self, const Tensor& dst) {
  if (is_lazyx(dst) && dst.sizes() != self.sizes()) {
    resize_impl(dst, self.sizes());
  } else if (!is_lazyx(dst) && dst.sizes() != self.sizes()) {
    dst.resize_(self.sizes());
  }
  copy_impl(dst, self);
  return dst;
}

Tensor clone(const Tensor& self, optional<c10::MemoryFormat>) { return wrap(lz(self).clone()); }

c10::Scalar _local_scalar_dense(const Tensor& self) {
  PyCause cause("value read by item()");
  LT t = lz(self);
  switch (t.dtype()) {
    case lazyx::Dtype::Bool:
      return c10::Scalar(t.item<bool>());
    case lazyx::Dtype::UInt8:
    case lazyx::Dtype::Int8:
    case lazyx::Dtype::Int16:
    case lazyx::Dtype::Int32:
    case lazyx::Dtype::Int64:
      return c10::Scalar(t.item<int64_t>());
    case lazyx::Dtype::Float16:
      return c10::Scalar(c10::Half(static_cast<float>(t.item<double>())));
    case lazyx::Dtype::BFloat16:
      return c10::Scalar(c10::BFloat16(static_cast<float>(t.item<double>())));
    case lazyx::Dtype::Float32:
      return c10::Scalar(static_cast<float>(t.item<double>()));
    case lazyx::Dtype::Float64:
      return c10::Scalar(t.item<double>());
  }
  return c10::Scalar(0);
}

Tensor& fill_scalar(Tensor& self, const c10::Scalar& v) {
  LzTensorImpl* impl = lz_impl(self);
  if (impl->fresh()) {
    return assign(self, lazyx::full(impl->tensor().sizes(), to_lz(v), impl->tensor().dtype()),
                  true);
  }
  // The old buffer is not read; at mark_step the engine donates it to the new value anyway
  // (an unread parameter), so zero_grad(set_to_none=False) allocates nothing.
  LT t = lz(self);
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

// The other distributions by inverting uniform draws u in [0, 1) (float64 inside, rounded once).
LT uniform_like(const Tensor& self, optional<at::Generator> gen) {
  seed_from_torch(gen);
  return lazyx::rand(lz_impl(self)->tensor().sizes(), lazyx::kFloat64);
}
Tensor& set_drawn(Tensor& self, const LT& r) {
  return assign(self, r.to(lz_impl(self)->tensor().dtype()), true);
}
Tensor& exponential_(Tensor& self, double lambd, optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0, "[exponential_] expects lambda > 0.0, but found lambda=", lambd);
  return set_drawn(self, lazyx::log1p(uniform_like(self, gen).neg()).div(-lambd));
}
Tensor& cauchy_(Tensor& self, double median, double sigma, optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0, "[cauchy_] expects sigma > 0.0, but found sigma=", sigma);
  LT t = lazyx::tan(uniform_like(self, gen).sub(0.5).mul(M_PI));
  return set_drawn(self, t.mul(sigma).add(median));
}
Tensor& log_normal_(Tensor& self, double mean, double std, optional<at::Generator> gen) {
  TORCH_CHECK(std > 0, "[log_normal_] expects std > 0.0, but found std=", std);
  seed_from_torch(gen);
  LT n = lazyx::randn(lz_impl(self)->tensor().sizes(), lazyx::kFloat64);
  return set_drawn(self, n.mul(std).add(mean).exp());
}
// The number of Bernoulli(p) trials up to the first success: floor(log(1 - u) / log(1 - p)) + 1.
Tensor& geometric_(Tensor& self, double p, optional<at::Generator> gen) {
  TORCH_CHECK(p > 0 && p < 1, "[geometric_] expects p to be in (0, 1), but got p=", p);
  LT k = lazyx::floor(lazyx::log1p(uniform_like(self, gen).neg()).div(std::log1p(-p)));
  return set_drawn(self, k.add(1.0));
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
  int64_t hi = t.dtype() == lazyx::kFloat32   ? (int64_t{1} << 24) + 1
               : t.dtype() == lazyx::kFloat64 ? (int64_t{1} << 53) + 1
               : t.dtype() == lazyx::kBool    ? 2
                                              : (int64_t{1} << 31) - 1;
  return random_range(self, 0, hi, gen);
}

Tensor& bernoulli_float(Tensor& self, double p, optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::rand(t.sizes(), lazyx::kFloat32).lt(p).to(t.dtype());
  return assign(self, r, true);
}

Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                   Tensor& out) {
  LzTensorImpl* impl = lz_impl(out);
  LT r = lazyx::arange(to_lz(start), to_lz(end), to_lz(step), impl->tensor().dtype());
  if (r.sizes() != impl->tensor().sizes()) {
    impl->set_tensor(r, c10::Storage(c10::make_intrusive<LzStorage>(r)));
    impl->set_fresh(false);
    return out;
  }
  return assign(out, r, true);
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "empty.memory_format", LZ_FN(empty_memory_format));
  impl(m, "empty_strided", LZ_FN(empty_strided));
  impl(m, "copy_", TORCH_FN(copy_));
  impl(m, "_copy_from", LZ_FN(_copy_from));
  impl(m, "_copy_from_and_resize", LZ_FN(_copy_from_and_resize));
  impl(m, "clone", LZ_FN(clone));
  impl(m, "_local_scalar_dense", LZ_FN(_local_scalar_dense));
  impl(m, "fill_.Scalar", LZ_FN(fill_scalar));
  impl(m, "fill_.Tensor", LZ_FN(fill_tensor));
  impl(m, "zero_", LZ_FN(zero_));
  impl(m, "normal_", LZ_FN(normal_));
  impl(m, "uniform_", LZ_FN(uniform_));
  impl(m, "exponential_", LZ_FN(exponential_));
  impl(m, "cauchy_", LZ_FN(cauchy_));
  impl(m, "log_normal_", LZ_FN(log_normal_));
  impl(m, "geometric_", LZ_FN(geometric_));
  impl(m, "random_.from", LZ_FN(random_from));
  impl(m, "random_.to", LZ_FN(random_to));
  impl(m, "random_", LZ_FN(random_all));
  impl(m, "bernoulli_.float", LZ_FN(bernoulli_float));
  impl(m, "arange.start_out", LZ_FN(arange_out));
}

}  // namespace

}  // namespace lazyx_bridge
