// Kernels: reductions, norms, softmax, losses and layer norm, with their backward ops.
#include <limits>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;

namespace {

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
// A sum asked for in a narrow integer dtype or bool keeps that dtype, as in eager: the engine
// sums in int64, and the cast wraps as eager's accumulation does (bool: any element set).
LT sum_as_asked(LT r, optional<c10::ScalarType> dtype) {
  return dtype.has_value() && r.dtype() != to_lz(*dtype) ? r.to(to_lz(*dtype)) : r;
}
Tensor sum(const Tensor& a, optional<c10::ScalarType> dtype) {
  return wrap(sum_as_asked(sum_input(a, dtype).sum(), dtype));
}
Tensor sum_dim(const Tensor& a, at::OptionalIntArrayRef dim, bool keepdim,
               optional<c10::ScalarType> dtype) {
  if (a.dim() == 0) return wrap(sum_as_asked(sum_input(a, dtype).clone(), dtype));
  return wrap(sum_as_asked(sum_input(a, dtype).sum(opt_dims(dim), keepdim), dtype));
}
Tensor mean(const Tensor& a, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  return wrap(x.mean());
}
Tensor mean_dim(const Tensor& a, at::OptionalIntArrayRef dim, bool keepdim,
                optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  if (a.dim() == 0) return wrap(x.clone());
  return wrap(x.mean(opt_dims(dim), keepdim));
}
Tensor amax(const Tensor& a, c10::IntArrayRef dim, bool keepdim) {
  return wrap(lz(a).amax(to_dims(dim), keepdim));
}
Tensor amin(const Tensor& a, c10::IntArrayRef dim, bool keepdim) {
  return wrap(lz(a).amin(to_dims(dim), keepdim));
}
Tensor max_all(const Tensor& a) { return wrap(lz(a).amax()); }
Tensor min_all(const Tensor& a) { return wrap(lz(a).amin()); }
// The engine's argmax takes numbers: bool compares as 0/1.
LT argmax_input(const LT& x) { return x.dtype() == lazyx::kBool ? x.to(lazyx::kInt32) : x; }
std::tuple<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim) {
  LT x = lz(a);
  return {wrap(x.amax({dim}, keepdim)), wrap(argmax_input(x).argmax(dim, keepdim))};
}
Tensor argmax(const Tensor& a, optional<int64_t> dim, bool keepdim) {
  return wrap(argmax_input(lz(a)).argmax(
      dim.has_value() ? std::optional<int64_t>(*dim) : std::nullopt, keepdim));
}
Tensor logsumexp(const Tensor& a, c10::IntArrayRef dim, bool keepdim) {
  return wrap(lz(a).logsumexp(to_dims(dim), keepdim));
}

// Vector norms (clip_grad_norm_ calls these every step, so they must not fall back).
// 16-bit floats accumulate in float32 and round once, as eager does (their squares overflow).
LT vector_norm(LT x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  const lazyx::Dtype d = x.dtype();
  if (d == lazyx::kFloat16 || d == lazyx::kBFloat16) {
    return vector_norm(x.to(lazyx::kFloat32), p, dims, keepdim).to(d);
  }
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
Tensor norm_opt_dim(const Tensor& a, const optional<c10::Scalar>& p, c10::IntArrayRef dim,
                    bool keepdim) {
  return wrap(vector_norm(lz(a), p.has_value() ? p->toDouble() : 2.0, to_dims(dim), keepdim));
}
Tensor linalg_vector_norm(const Tensor& a, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                          bool keepdim, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value() && x.dtype() != to_lz(*dtype)) x = x.to(to_lz(*dtype));
  return wrap(vector_norm(x, ord.toDouble(), opt_dims(dim), keepdim));
}
LT var_impl(const Tensor& a, at::OptionalIntArrayRef dim, const optional<c10::Scalar>& correction,
            bool keepdim) {
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
  const double denom = std::max<double>(0.0, static_cast<double>(n) - correction_value(correction));
  return xc.mul(xc).sum(dims, keepdim).div(denom);
}
Tensor var_k(const Tensor& a, at::OptionalIntArrayRef dim, const optional<c10::Scalar>& correction,
             bool keepdim) {
  return wrap(var_impl(a, dim, correction, keepdim));
}
Tensor std_k(const Tensor& a, at::OptionalIntArrayRef dim, const optional<c10::Scalar>& correction,
             bool keepdim) {
  return wrap(var_impl(a, dim, correction, keepdim).sqrt());
}
// Over no elements, all is true and any is false (min and max have no value there). As in
// eager, a uint8 input gives a uint8 result; every other dtype gives bool.
Tensor all_any_k(const Tensor& a, bool all) {
  const lazyx::Dtype od = a.scalar_type() == at::kByte ? lazyx::kUInt8 : lazyx::kBool;
  if (a.numel() == 0) return wrap(lazyx::full({}, all ? 1 : 0, od));
  LT b = lz(a).ne(0).to(lazyx::kInt32);
  return wrap((all ? b.amin() : b.amax()).to(od));
}
Tensor all_k(const Tensor& a) { return all_any_k(a, true); }
Tensor any_k(const Tensor& a) { return all_any_k(a, false); }

Tensor _softmax(const Tensor& a, int64_t dim, bool) { return wrap(lz(a).softmax(dim)); }
Tensor _log_softmax(const Tensor& a, int64_t dim, bool) { return wrap(lz(a).log_softmax(dim)); }
// softmax whose rows of only -inf give zeros instead of NaN (attention with fully masked rows).
Tensor safe_softmax(const Tensor& a, int64_t dim, optional<c10::ScalarType> dtype) {
  LT x = lz(a);
  if (dtype.has_value()) x = x.to(to_lz(*dtype));
  const int64_t d = wrap_dim(dim, a.dim());
  LT masked = x.eq(-std::numeric_limits<double>::infinity()).to(lazyx::kInt64).amin({d}, true);
  return wrap(lazyx::where(masked.ne(0), lazyx::Scalar(0.0), x.softmax(d)));
}
// channel_shuffle: channels (dim 1) seen as [groups, C / groups], transposed.
Tensor channel_shuffle(const Tensor& a, c10::SymInt groups_sym) {
  const int64_t g = groups_sym.expect_int();
  TORCH_CHECK(a.dim() >= 3 && g > 0 && a.size(1) % g == 0, "[channel_shuffle] expected a tensor "
              "of rank 3 or more whose channels (dim 1) divide into ", g, " groups, got shape ",
              a.sizes(), ".");
  std::vector<int64_t> split{a.size(0), g, a.size(1) / g};
  for (int64_t k = 2; k < a.dim(); ++k) split.push_back(a.size(k));
  return wrap(lz(a).reshape(split).transpose(1, 2).reshape(to_shape(a.sizes())));
}
Tensor _softmax_backward_data(const Tensor& grad, const Tensor& out, int64_t dim, c10::ScalarType) {
  LT g = lz(grad), y = lz(out);
  return wrap(y.mul(g.sub(g.mul(y).sum({dim}, true))));
}
Tensor _log_softmax_backward_data(const Tensor& grad, const Tensor& out, int64_t dim,
                                  c10::ScalarType) {
  LT g = lz(grad), y = lz(out);
  return wrap(g.sub(y.exp().mul(g.sum({dim}, true))));
}

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
Tensor mse_loss_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                         int64_t reduction) {
  LT d = lz(self).sub(operand(target, lz(self)));
  double scale =
      reduction == 1 ? 2.0 / static_cast<double>(std::max<int64_t>(1, self.numel())) : 2.0;
  return wrap(d.mul(scale).mul(lz(grad)));
}

// Layer norm over the trailing normalized_shape dims; mean and rstd keep those dims as size 1.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     c10::SymIntArrayRef nshape,
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

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  // Reductions.
  impl(m, "sum", LZ_FN(sum));
  impl(m, "sum.dim_IntList", LZ_FN(sum_dim));
  impl(m, "mean", LZ_FN(mean));
  impl(m, "mean.dim", LZ_FN(mean_dim));
  impl(m, "amax", LZ_FN(amax));
  impl(m, "amin", LZ_FN(amin));
  impl(m, "max", LZ_FN(max_all));
  impl(m, "min", LZ_FN(min_all));
  impl(m, "max.dim", LZ_FN(max_dim));
  impl(m, "argmax", LZ_FN(argmax));
  impl(m, "logsumexp", LZ_FN(logsumexp));
  impl(m, "norm.Scalar", LZ_FN(norm_scalar));
  impl(m, "norm.ScalarOpt_dim", LZ_FN(norm_opt_dim));
  impl(m, "linalg_vector_norm", LZ_FN(linalg_vector_norm));
  impl(m, "all", LZ_FN(all_k));
  impl(m, "var.correction", LZ_FN(var_k));
  impl(m, "std.correction", LZ_FN(std_k));
  impl(m, "any", LZ_FN(any_k));
  // Softmax.
  impl(m, "_softmax", LZ_FN(_softmax));
  impl(m, "_safe_softmax", LZ_FN(safe_softmax));
  impl(m, "channel_shuffle", LZ_FN(channel_shuffle));
  impl(m, "_log_softmax", LZ_FN(_log_softmax));
  impl(m, "_softmax_backward_data", LZ_FN(_softmax_backward_data));
  impl(m, "_log_softmax_backward_data", LZ_FN(_log_softmax_backward_data));
  // Losses and normalization.
  impl(m, "nll_loss_forward", LZ_FN(nll_loss_forward));
  impl(m, "nll_loss_backward", LZ_FN(nll_loss_backward));
  impl(m, "mse_loss", LZ_FN(mse_loss));
  impl(m, "mse_loss_backward", LZ_FN(mse_loss_backward));
  impl(m, "native_layer_norm", LZ_FN(native_layer_norm));
  impl(m, "native_layer_norm_backward", LZ_FN(native_layer_norm_backward));
}

}  // namespace

}  // namespace lazyx_bridge
