// Kernels: compositions of native ops with no IR op of their own (equal, isin, bernoulli_ with
// tensor p, normal with tensor mean or std, unfold_backward, renorm, native_dropout).
#include <ATen/ExpandUtils.h>
#include <ATen/ATen.h>
#include <torch/library.h>

#include "diag_bridge.h"
#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

// Shapes are compared on the host; values by one device reduction and one read.
bool equal(const Tensor& self, const Tensor& other) {
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  PyCause cause("value read by torch.equal");
  LT diff = lz(self).ne(lz(other)).to(lazyx::kInt64).sum();
  return diff.item<int64_t>() == 0;
}

// x in test: x[..., None] == test.flatten(), reduced over the last dim.
LT isin_lz(const LT& x, const LT& test, bool invert) {
  LT flat = test.reshape({test.numel()});
  LT hits = x.unsqueeze(static_cast<int64_t>(x.shape().size())).eq(flat);
  LT count = hits.to(lazyx::kInt64).sum({static_cast<int64_t>(x.shape().size())});
  return invert ? count.eq(lazyx::Scalar(int64_t{0})) : count.ne(lazyx::Scalar(int64_t{0}));
}

// Eager's isin has no bool kernel (torch 2.x added the 16-bit floats); fail as it does.
void check_isin_dtype(const Tensor& t) {
  const auto st = t.scalar_type();
  TORCH_CHECK(st != at::kBool, "[isin] unsupported input dtype ", st,
              "; convert the inputs to an integer or floating dtype");
}

Tensor isin_tt(const Tensor& x, const Tensor& test, bool, bool invert) {
  check_isin_dtype(x);
  check_isin_dtype(test);
  return wrap(isin_lz(lz(x), lz(test), invert));
}

Tensor isin_ts(const Tensor& x, const c10::Scalar& test, bool, bool invert) {
  check_isin_dtype(x);
  LT t = lazyx::scalar_tensor(to_lz(test));
  return wrap(isin_lz(lz(x), t, invert));
}

// rand < p on the engine's generator; p broadcasts to self.
Tensor& bernoulli_tensor(Tensor& self, const Tensor& p, c10::optional<at::Generator> gen) {
  seed_from_torch(gen);
  LT t = lz_impl(self)->tensor();
  LT r = lazyx::rand(t.sizes(), lazyx::kFloat32).lt(lz(p)).to(t.dtype());
  return assign(self, r, true);
}

// mean + std * randn(shape) in dtype (the floating dtype of the tensor operand).
LT normal_lz(const LT& mean, const LT& std, at::IntArrayRef shape, lazyx::Dtype dtype,
             c10::optional<at::Generator> gen) {
  TORCH_CHECK(lazyx::is_floating(dtype), "[normal] mean and std must be floating tensors, got ",
              static_cast<int>(dtype), "; convert them to a floating dtype");
  seed_from_torch(gen);
  LT r = lazyx::randn(lazyx::Shape(shape.begin(), shape.end()), dtype);
  return r.mul(std).add(mean).to(dtype);
}

Tensor normal_tf(const Tensor& mean, double std, c10::optional<at::Generator> gen) {
  LT m = lz(mean);
  return wrap(normal_lz(m, lazyx::scalar_tensor(std, m.dtype()), mean.sizes(), m.dtype(), gen));
}

Tensor normal_ft(double mean, const Tensor& std, c10::optional<at::Generator> gen) {
  LT s = lz(std);
  return wrap(normal_lz(lazyx::scalar_tensor(mean, s.dtype()), s, std.sizes(), s.dtype(), gen));
}

Tensor normal_tt(const Tensor& mean, const Tensor& std, c10::optional<at::Generator> gen) {
  auto shape = at::infer_size(mean.sizes(), std.sizes());
  LT m = lz(mean);
  return wrap(normal_lz(m, lz(std), shape, m.dtype(), gen));
}

// Tensor.unfold's gradient: the windows summed back with one index_add over the input dim.
Tensor unfold_backward(const Tensor& grad, at::IntArrayRef input_sizes, int64_t dim, int64_t size,
                       int64_t step) {
  if (input_sizes.empty()) return grad.reshape({});
  dim = c10::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  const int64_t n = grad.size(dim);
  auto opts = grad.options().dtype(at::kLong);
  Tensor idx = (at::arange(n, opts) * step).unsqueeze(1) + at::arange(size, opts).unsqueeze(0);
  Tensor g = grad.movedim(-1, dim + 1).flatten(dim, dim + 1);
  return at::zeros(input_sizes, grad.options()).index_add(dim, idx.reshape({-1}), g);
}

// Each slice along dim scaled to a p-norm of at most maxnorm (norm in float for 16-bit floats).
Tensor renorm_impl(const Tensor& self, const c10::Scalar& p, int64_t dim,
                   const c10::Scalar& maxnorm) {
  TORCH_CHECK(self.is_floating_point(), "[renorm] expects a floating tensor, got ",
              self.scalar_type(), "; convert it to a floating dtype");
  TORCH_CHECK(p.toDouble() > 0 && maxnorm.toDouble() >= 0,
              "[renorm] p must be positive and maxnorm non-negative; pass valid values");
  TORCH_CHECK(self.dim() > 1, "[renorm] input needs at least 2 dimensions, got ", self.dim(),
              "; reshape the input");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != dim) dims.push_back(d);
  }
  const bool half = self.scalar_type() == at::kBFloat16 || self.scalar_type() == at::kHalf;
  auto acc = half ? c10::optional<at::ScalarType>(at::kFloat) : c10::nullopt;
  Tensor norm = at::linalg_vector_norm(self, p, dims, true, acc);
  const double mx = maxnorm.toDouble();
  Tensor factor = at::where(norm > mx, mx / (norm + 1e-7), at::ones_like(norm));
  return self * factor.to(self.scalar_type());
}

Tensor& renorm_inplace(Tensor& self, const c10::Scalar& p, int64_t dim,
                       const c10::Scalar& maxnorm) {
  return self.copy_(renorm_impl(self, p, dim, maxnorm));
}

// torch runs dropout on a lazy device as native_dropout, one op as on CUDA: the mask is
// bernoulli(1 - p) on the engine's generator, the output input * mask / (1 - p).
std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p,
                                          c10::optional<bool> train) {
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(keep);
  return {input.mul(mask).mul_(keep == 0 ? 0.0 : 1.0 / keep), mask};
}

Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  return grad.mul(mask).mul(scale);  // integer grads promote to floats, as eager's do
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "native_dropout", LZ_FN(native_dropout));
  impl(m, "native_dropout_backward", LZ_FN(native_dropout_backward));
  impl(m, "equal", LZ_FN(equal));
  impl(m, "isin.Tensor_Tensor", LZ_FN(isin_tt));
  impl(m, "isin.Tensor_Scalar", LZ_FN(isin_ts));
  impl(m, "bernoulli_.Tensor", LZ_FN(bernoulli_tensor));
  impl(m, "normal.Tensor_float", LZ_FN(normal_tf));
  impl(m, "normal.float_Tensor", LZ_FN(normal_ft));
  impl(m, "normal.Tensor_Tensor", LZ_FN(normal_tt));
  impl(m, "unfold_backward", LZ_FN(unfold_backward));
  impl(m, "renorm", LZ_FN(renorm_impl));
  impl(m, "renorm_", LZ_FN(renorm_inplace));
}

}  // namespace lazyx_bridge
