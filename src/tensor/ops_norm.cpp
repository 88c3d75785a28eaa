// Batch norm and group norm with their gradients: compositions of reductions and elementwise
// ops (the cpu backend fuses them). Running statistics are updated with in-place ops, so their
// buffers are donated like any in-place update.
#include <algorithm>
#include <string>

#include "lazyx/ops.h"
#include "lazyx/pool.h"
#include "tensor/ops_common.h"
#include "tensor/pool_taps.h"

namespace lazyx {

using namespace detail;

namespace {

// The channel dim 1 broadcast against x: [1, C, 1, ...].
Tensor per_channel(const Tensor& v, int64_t rank, Dtype d) {
  Shape s(static_cast<size_t>(rank), 1);
  s[1] = v.numel();
  Tensor r = v.reshape(s);
  return r.dtype() == d ? r : r.to(d);
}

// Sum over every dim but 1, as two trailing reductions (the engine reduces trailing dims fastest).
Tensor channel_sum(const Tensor& t) {
  const int64_t n = t.size(0), c = t.size(1);
  return t.reshape({n, c, c == 0 || n == 0 ? 0 : t.numel() / (n * c)}).sum({2}).sum({0});
}

void check_input(const char* op, const Tensor& x) {
  if (x.dim() < 2 || !is_floating(x.dtype())) {
    ir::fail(op, "expected a floating point input of at least 2 dims (N, C, ...), got " +
                     ir::shape_str(x.shape()) + " " + dtype_name(x.dtype()) +
                     "; add a batch dim or convert to float32.");
  }
}

// Elements per (sample, group): channels per group times the spatial size.
int64_t group_size(const Tensor& x, int64_t groups) {
  int64_t hw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) hw *= x.size(d);
  return x.size(1) / groups * hw;
}

void check_channels(const char* op, const char* what, const Tensor& t, int64_t c) {
  if (t.defined() && t.numel() != c) {
    ir::fail(op, std::string(what) + " has " + std::to_string(t.numel()) +
                     " elements but the "
                     "input has " +
                     std::to_string(c) + " channels; pass one value per channel.");
  }
}

// x * scale + shift, per channel, with optional affine weight and bias.
Tensor normalize(const Tensor& xc, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                 const Tensor& bias) {
  const int64_t r = xc.dim();
  const Dtype cd = xc.dtype();
  Tensor out = xc.sub(per_channel(mean, r, cd)).mul(per_channel(invstd, r, cd));
  if (weight.defined()) out = out.mul(per_channel(weight, r, cd));
  if (bias.defined()) out = out.add(per_channel(bias, r, cd));
  return out;
}

// running <- (1 - momentum) * running + momentum * value, in place.
void update_running(Tensor running, const Tensor& value, double momentum) {
  if (!running.defined()) return;
  running.mul_(1.0 - momentum);
  running.add_(value.dtype() == running.dtype() ? value : value.to(running.dtype()), momentum);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& x, const Tensor& weight,
                                              const Tensor& bias, Tensor running_mean,
                                              Tensor running_var, bool training, double momentum,
                                              double eps) {
  const char* op = "batch_norm";
  check_input(op, x);
  const int64_t c = x.size(1);
  for (auto [t, name] : {std::pair{&weight, "weight"},
                         {&bias, "bias"},
                         {&running_mean, "running_mean"},
                         {&running_var, "running_var"}}) {
    check_channels(op, name, *t, c);
  }
  const Dtype cd = compute_dtype(x.dtype());
  Tensor xc = x.dtype() == cd ? x : x.to(cd);
  if (!training) {
    if (!running_mean.defined() || !running_var.defined()) {
      ir::fail(op, "eval mode needs running_mean and running_var; pass them or use training.");
    }
    Tensor invstd = running_var.to(cd).add(eps).rsqrt();
    Tensor out = normalize(xc, running_mean.to(cd), invstd, weight, bias);
    return {out.to(x.dtype()), zeros({0}, x.dtype()), zeros({0}, x.dtype())};
  }
  if (x.numel() == 0) {  // no statistics to take: zeros, running statistics unchanged
    return {zeros(x.shape(), x.dtype()), zeros({c}, x.dtype()), zeros({c}, x.dtype())};
  }
  const int64_t n = x.numel() / c;
  Tensor mean = channel_sum(xc).div(static_cast<double>(n));
  Tensor centered = xc.sub(per_channel(mean, x.dim(), cd));
  Tensor var = channel_sum(centered.mul(centered)).div(static_cast<double>(n));
  Tensor invstd = var.add(eps).rsqrt();
  Tensor out = normalize(xc, mean, invstd, weight, bias);
  update_running(running_mean, mean, momentum);
  if (running_var.defined()) {
    update_running(running_var, var.mul(static_cast<double>(n) / static_cast<double>(n - 1)),
                   momentum);
  }
  return {out.to(x.dtype()), mean.to(x.dtype()), invstd.to(x.dtype())};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool training,
    double eps, std::array<bool, 3> mask) {
  const char* op = "batch_norm_backward";
  check_input(op, x);
  const Dtype cd = compute_dtype(x.dtype());
  const int64_t r = x.dim(), c = x.size(1);
  const Tensor& m = training ? save_mean : running_mean;
  if (!m.defined() || (training ? !save_invstd.defined() : !running_var.defined())) {
    ir::fail(op, "the saved (training) or running (eval) statistics are missing; pass them.");
  }
  Tensor mean = m.to(cd);
  Tensor invstd = training ? save_invstd.to(cd) : running_var.to(cd).add(eps).rsqrt();
  Tensor xc = x.to(cd), g = grad.to(cd);
  Tensor centered = xc.sub(per_channel(mean, r, cd));
  Tensor gsum = channel_sum(g);
  Tensor dotp = channel_sum(g.mul(centered));
  Tensor dx, dw, db;
  if (mask[0]) {
    Tensor scale = weight.defined() ? invstd.mul(weight.to(cd)) : invstd;
    if (training) {
      const double n = static_cast<double>(c == 0 ? 0 : x.numel() / c);
      Tensor k = dotp.mul(invstd).mul(invstd).div(n);
      Tensor d = g.sub(per_channel(gsum.div(n), r, cd)).sub(centered.mul(per_channel(k, r, cd)));
      dx = d.mul(per_channel(scale, r, cd)).to(x.dtype());
    } else {
      dx = g.mul(per_channel(scale, r, cd)).to(x.dtype());
    }
  }
  const Dtype wd = weight.defined() ? weight.dtype() : x.dtype();
  if (mask[1]) dw = dotp.mul(invstd).to(wd);
  if (mask[2]) db = gsum.to(wd);
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& x, const Tensor& weight,
                                              const Tensor& bias, int64_t groups, double eps) {
  const char* op = "group_norm";
  check_input(op, x);
  const int64_t n = x.size(0), c = x.size(1);
  if (groups <= 0 || c % groups != 0) {
    ir::fail(op, "the " + std::to_string(c) + " channels do not split into " +
                     std::to_string(groups) + " groups; pass a divisor of the channel count.");
  }
  check_channels(op, "weight", weight, c);
  check_channels(op, "bias", bias, c);
  const Dtype cd = compute_dtype(x.dtype());
  Tensor xg = x.to(cd).reshape({n, groups, group_size(x, groups)});
  Tensor mean = xg.mean({2}, true);
  Tensor centered = xg.sub(mean);
  Tensor rstd = centered.mul(centered).mean({2}, true).add(eps).rsqrt();
  Tensor out = centered.mul(rstd).reshape(x.shape());
  if (weight.defined()) out = out.mul(per_channel(weight, x.dim(), cd));
  if (bias.defined()) out = out.add(per_channel(bias, x.dim(), cd));
  return {out.to(x.dtype()), mean.reshape({n, groups}).to(x.dtype()),
          rstd.reshape({n, groups}).to(x.dtype())};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& x,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight, int64_t groups,
                                                       std::array<bool, 3> mask) {
  check_input("group_norm_backward", x);
  const Dtype cd = compute_dtype(x.dtype());
  const int64_t n = x.size(0), c = x.size(1);
  Tensor mu = mean.to(cd).reshape({n, groups, 1}), rs = rstd.to(cd).reshape({n, groups, 1});
  Tensor g = grad.to(cd);
  const int64_t d = group_size(x, groups), hw = d / std::max<int64_t>(c / groups, 1);
  Tensor xhat = x.to(cd).reshape({n, groups, d}).sub(mu).mul(rs);
  Tensor dx, dw, db;
  if (mask[0]) {
    Tensor gw = weight.defined() ? g.mul(per_channel(weight, x.dim(), cd)) : g;
    Tensor gg = gw.reshape({n, groups, d});
    Tensor d = gg.sub(gg.mean({2}, true)).sub(xhat.mul(gg.mul(xhat).mean({2}, true))).mul(rs);
    dx = d.reshape(x.shape()).to(x.dtype());
  }
  const Dtype wd = weight.defined() ? weight.dtype() : x.dtype();
  Tensor g3 = g.reshape({n, c, hw});
  if (mask[1]) dw = channel_sum(g3.mul(xhat.reshape({n, c, hw}))).to(wd);
  if (mask[2]) db = channel_sum(g3).to(wd);
  return {dx, dw, db};
}

}  // namespace lazyx
