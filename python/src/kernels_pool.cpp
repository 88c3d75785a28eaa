// Kernels: pooling, batch/group norm, upsampling, reflection/replication padding, im2col/col2im
// and max_unpool, forward and backward (lazyx/pool.h compositions).
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;

namespace {

LT opt(const optional<Tensor>& t) { return t.has_value() && t->defined() ? lz(*t) : LT(); }
Tensor wrap_opt(const LT& t) { return t.defined() ? wrap(t) : Tensor(); }

lazyx::PoolParams params(c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
                         c10::IntArrayRef d, bool ceil) {
  lazyx::PoolParams r;
  r.kernel = to_dims(k);
  r.stride = to_dims(s);
  r.padding = to_dims(p);
  r.dilation = to_dims(d);
  r.ceil_mode = ceil;
  if (r.stride.empty()) r.stride = r.kernel;
  return r;
}

// Batch and group norm.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input,
                                                     const optional<Tensor>& weight,
                                                     const optional<Tensor>& bias,
                                                     const optional<Tensor>& running_mean,
                                                     const optional<Tensor>& running_var,
                                                     bool training, double momentum, double eps) {
  auto [out, mean, invstd] = lazyx::batch_norm(lz(input), opt(weight), opt(bias), opt(running_mean),
                                               opt(running_var), training, momentum, eps);
  return {wrap(out), wrap(mean), wrap(invstd)};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad, const Tensor& input, const optional<Tensor>& weight,
    const optional<Tensor>& running_mean, const optional<Tensor>& running_var,
    const optional<Tensor>& save_mean, const optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  auto [dx, dw, db] = lazyx::batch_norm_backward(
      lz(grad), lz(input), opt(weight), opt(running_mean), opt(running_var), opt(save_mean),
      opt(save_invstd), train, eps, mask);
  return {wrap_opt(dx), wrap_opt(dw), wrap_opt(db)};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input,
                                                     const optional<Tensor>& weight,
                                                     const optional<Tensor>& bias, c10::SymInt,
                                                     c10::SymInt, c10::SymInt, int64_t group,
                                                     double eps) {
  auto [out, mean, rstd] = lazyx::group_norm(lz(input), opt(weight), opt(bias), group, eps);
  return {wrap(out), wrap(mean), wrap(rstd)};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
    const optional<Tensor>& weight, c10::SymInt, c10::SymInt, c10::SymInt, int64_t group,
    std::array<bool, 3> mask) {
  auto [dx, dw, db] =
      lazyx::group_norm_backward(lz(grad), lz(input), lz(mean), lz(rstd), opt(weight), group, mask);
  return {wrap_opt(dx), wrap_opt(dw), wrap_opt(db)};
}

// Pooling.
std::tuple<Tensor, Tensor> max_pool_with_indices(const Tensor& self, c10::IntArrayRef k,
                                                 c10::IntArrayRef s, c10::IntArrayRef p,
                                                 c10::IntArrayRef d, bool ceil) {
  if (!self.is_floating_point()) {
    // The engine pools floating point values; eager's integer pooling runs on CPU.
    const bool three = k.size() == 3;
    lazyx::metrics::add_counter(three ? "aten::max_pool3d_with_indices"
                                      : "aten::max_pool2d_with_indices");
    auto [v, i] = three ? at::max_pool3d_with_indices(to_cpu(self), k, s, p, d, ceil)
                        : at::max_pool2d_with_indices(to_cpu(self), k, s, p, d, ceil);
    return {to_device(v), to_device(i)};
  }
  auto [v, i] = lazyx::max_pool(lz(self), params(k, s, p, d, ceil));
  return {wrap(v), wrap(i)};
}
Tensor max_pool_with_indices_backward(const Tensor& grad, const Tensor& self, c10::IntArrayRef k,
                                      c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, bool,
                                      const Tensor& indices) {
  return wrap(
      lazyx::max_pool_backward(lz(grad), lz(self), lz(indices), static_cast<int64_t>(k.size())));
}
Tensor avg_pool(const Tensor& self, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
                bool ceil, bool count_include_pad, optional<int64_t> divisor) {
  return wrap(
      lazyx::avg_pool(lz(self), params(k, s, p, {}, ceil), count_include_pad,
                      divisor.has_value() ? std::optional<int64_t>(*divisor) : std::nullopt));
}
Tensor avg_pool_backward(const Tensor& grad, const Tensor& self, c10::IntArrayRef k,
                         c10::IntArrayRef s, c10::IntArrayRef p, bool ceil, bool count_include_pad,
                         optional<int64_t> divisor) {
  return wrap(lazyx::avg_pool_backward(
      lz(grad), lz(self), params(k, s, p, {}, ceil), count_include_pad,
      divisor.has_value() ? std::optional<int64_t>(*divisor) : std::nullopt));
}
Tensor adaptive_avg_pool2d(const Tensor& self, c10::SymIntArrayRef out) {
  return wrap(lazyx::adaptive_avg_pool(lz(self), to_shape(out)));
}
Tensor adaptive_avg_pool3d(const Tensor& self, c10::IntArrayRef out) {
  return wrap(lazyx::adaptive_avg_pool(lz(self), to_shape(out)));
}
Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Tensor& self) {
  return wrap(lazyx::adaptive_avg_pool_backward(lz(grad), lz(self), 2));
}
Tensor adaptive_avg_pool3d_backward(const Tensor& grad, const Tensor& self) {
  return wrap(lazyx::adaptive_avg_pool_backward(lz(grad), lz(self), 3));
}
std::tuple<Tensor, Tensor> adaptive_max_pool(const Tensor& self, c10::IntArrayRef out) {
  auto [v, i] = lazyx::adaptive_max_pool(lz(self), to_shape(out));
  return {wrap(v), wrap(i)};
}
Tensor adaptive_max_pool2d_backward(const Tensor& grad, const Tensor& self, const Tensor& idx) {
  return wrap(lazyx::max_pool_backward(lz(grad), lz(self), lz(idx), 2));
}
Tensor adaptive_max_pool3d_backward(const Tensor& grad, const Tensor& self, const Tensor& idx) {
  return wrap(lazyx::max_pool_backward(lz(grad), lz(self), lz(idx), 3));
}
Tensor max_unpool2d(const Tensor& self, const Tensor& indices, c10::IntArrayRef out) {
  return wrap(lazyx::max_unpool(lz(self), lz(indices), to_shape(out)));
}
Tensor max_unpool3d(const Tensor& self, const Tensor& indices, c10::IntArrayRef out,
                    c10::IntArrayRef, c10::IntArrayRef) {
  return wrap(lazyx::max_unpool(lz(self), lz(indices), to_shape(out)));
}

// im2col / col2im (nn.functional.unfold / fold).
Tensor im2col(const Tensor& self, c10::IntArrayRef k, c10::IntArrayRef d, c10::IntArrayRef p,
              c10::IntArrayRef s) {
  return wrap(lazyx::im2col(lz(self), params(k, s, p, d, false)));
}
Tensor col2im(const Tensor& self, c10::SymIntArrayRef out, c10::IntArrayRef k, c10::IntArrayRef d,
              c10::IntArrayRef p, c10::IntArrayRef s) {
  return wrap(lazyx::col2im(lz(self), to_shape(out), params(k, s, p, d, false)));
}

// Padding.
template <lazyx::PadMode M>
Tensor pad_k(const Tensor& self, c10::IntArrayRef pads) {
  return wrap(lazyx::pad(lz(self), to_dims(pads), M));
}
template <lazyx::PadMode M>
Tensor pad_backward_k(const Tensor& grad, const Tensor& self, c10::IntArrayRef pads) {
  return wrap(lazyx::pad_backward(lz(grad), to_shape(self.sizes()), to_dims(pads), M));
}

}  // namespace

// torch 2.x's batch-norm entry points, all on native_batch_norm: _batch_norm_with_update
// (training; running statistics updated in place), _batch_norm_no_update, the
// _native_batch_norm_legit pair, and batch_norm_backward. Their `reserve` is empty, as on CPU.
using T4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
Tensor empty_reserve() { return wrap(lazyx::zeros({0}, lazyx::kUInt8)); }
T4 bn_with_update(const Tensor& in, const optional<Tensor>& w, const optional<Tensor>& b,
                  Tensor& rm, Tensor& rv, double momentum, double eps) {
  auto [o, mean, invstd] = lazyx_bridge::native_batch_norm(in, w, b, rm, rv, true, momentum, eps);
  return {o, mean, invstd, empty_reserve()};
}
T4 bn_no_update(const Tensor& in, const optional<Tensor>& w, const optional<Tensor>& b,
                const optional<Tensor>& rm, const optional<Tensor>& rv, double momentum,
                double eps) {
  // Without running statistics the batch's own are used, as eager does.
  const bool batch_stats = !rm.has_value() || !rm->defined();
  auto [o, mean, invstd] = lazyx_bridge::native_batch_norm(in, w, b, rm, rv, batch_stats, momentum, eps);
  return {o, mean, invstd, empty_reserve()};
}
std::tuple<Tensor, Tensor, Tensor> bn_legit(const Tensor& in, const optional<Tensor>& w,
                                            const optional<Tensor>& b, Tensor& rm, Tensor& rv,
                                            bool training, double momentum, double eps) {
  return lazyx_bridge::native_batch_norm(in, w, b, rm, rv, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats(const Tensor& in, const optional<Tensor>& w,
                                                     const optional<Tensor>& b, bool training,
                                                     double momentum, double eps) {
  return lazyx_bridge::native_batch_norm(in, w, b, c10::nullopt, c10::nullopt, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_backward(
    const Tensor& grad, const Tensor& in, const Tensor& w, const optional<Tensor>& rm,
    const optional<Tensor>& rv, const optional<Tensor>& save_mean,
    const optional<Tensor>& save_var, bool update, double eps, std::array<bool, 3> mask,
    const Tensor&) {
  optional<Tensor> wo = w.defined() ? optional<Tensor>(w) : c10::nullopt;
  return lazyx_bridge::native_batch_norm_backward(grad, in, wo, rm, rv, save_mean, save_var, update, eps, mask);
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "native_batch_norm", LZ_FN(native_batch_norm));
  impl(m, "native_batch_norm_backward", LZ_FN(native_batch_norm_backward));
  impl(m, "_batch_norm_with_update", LZ_FN(bn_with_update));
  impl(m, "_batch_norm_no_update", LZ_FN(bn_no_update));
  impl(m, "_native_batch_norm_legit", LZ_FN(bn_legit));
  impl(m, "_native_batch_norm_legit.no_stats", LZ_FN(bn_legit_no_stats));
  impl(m, "batch_norm_backward", LZ_FN(bn_backward));
  impl(m, "native_group_norm", LZ_FN(native_group_norm));
  impl(m, "native_group_norm_backward", LZ_FN(native_group_norm_backward));
  impl(m, "max_pool2d_with_indices", LZ_FN(max_pool_with_indices));
  impl(m, "max_pool3d_with_indices", LZ_FN(max_pool_with_indices));
  impl(m, "max_pool2d_with_indices_backward", LZ_FN(max_pool_with_indices_backward));
  impl(m, "max_pool3d_with_indices_backward", LZ_FN(max_pool_with_indices_backward));
  impl(m, "avg_pool2d", LZ_FN(avg_pool));
  impl(m, "avg_pool3d", LZ_FN(avg_pool));
  impl(m, "avg_pool2d_backward", LZ_FN(avg_pool_backward));
  impl(m, "avg_pool3d_backward", LZ_FN(avg_pool_backward));
  impl(m, "_adaptive_avg_pool2d", LZ_FN(adaptive_avg_pool2d));
  impl(m, "_adaptive_avg_pool3d", LZ_FN(adaptive_avg_pool3d));
  impl(m, "_adaptive_avg_pool2d_backward", LZ_FN(adaptive_avg_pool2d_backward));
  impl(m, "_adaptive_avg_pool3d_backward", LZ_FN(adaptive_avg_pool3d_backward));
  impl(m, "adaptive_max_pool2d", LZ_FN(adaptive_max_pool));
  impl(m, "adaptive_max_pool3d", LZ_FN(adaptive_max_pool));
  impl(m, "adaptive_max_pool2d_backward", LZ_FN(adaptive_max_pool2d_backward));
  impl(m, "adaptive_max_pool3d_backward", LZ_FN(adaptive_max_pool3d_backward));
  impl(m, "max_unpool2d", LZ_FN(max_unpool2d));
  impl(m, "max_unpool3d", LZ_FN(max_unpool3d));
  impl(m, "im2col", LZ_FN(im2col));
  impl(m, "col2im", LZ_FN(col2im));
  using lazyx::PadMode;
  impl(m, "reflection_pad1d", LZ_FN(pad_k<PadMode::Reflect>));
  impl(m, "reflection_pad2d", LZ_FN(pad_k<PadMode::Reflect>));
  impl(m, "reflection_pad3d", LZ_FN(pad_k<PadMode::Reflect>));
  impl(m, "replication_pad1d", LZ_FN(pad_k<PadMode::Replicate>));
  impl(m, "replication_pad2d", LZ_FN(pad_k<PadMode::Replicate>));
  impl(m, "replication_pad3d", LZ_FN(pad_k<PadMode::Replicate>));
  impl(m, "reflection_pad1d_backward", LZ_FN(pad_backward_k<PadMode::Reflect>));
  impl(m, "reflection_pad2d_backward", LZ_FN(pad_backward_k<PadMode::Reflect>));
  impl(m, "reflection_pad3d_backward", LZ_FN(pad_backward_k<PadMode::Reflect>));
  impl(m, "replication_pad1d_backward", LZ_FN(pad_backward_k<PadMode::Replicate>));
  impl(m, "replication_pad2d_backward", LZ_FN(pad_backward_k<PadMode::Replicate>));
  impl(m, "replication_pad3d_backward", LZ_FN(pad_backward_k<PadMode::Replicate>));
}

}  // namespace lazyx_bridge
