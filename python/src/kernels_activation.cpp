// Kernels: activations and their backward ops, composed of engine ops with eager's formulas
// (its branch conditions, so NaN and the kinks match). 16-bit inputs compute in float32 and
// round once at the end, as eager does.
#include <torch/library.h>

#include <tuple>

#include "kernels_math.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Scalar;
using lazyx::where;

namespace {

bool is16(lazyx::Dtype d) { return d == lazyx::kBFloat16 || d == lazyx::kFloat16; }
LT up(const Tensor& a) {
  LT x = lz(a);
  return is16(x.dtype()) ? x.to(lazyx::kFloat32) : x;
}
LT down(const LT& r, const Tensor& like) {
  lazyx::Dtype d = to_lz(like.scalar_type());
  return r.dtype() == d ? r : r.to(d);
}
double dbl(const c10::Scalar& s) { return s.toDouble(); }
// Eager's hardsigmoid_backward multiplies by 1/6 rounded to float32, in every dtype.
const double kOneSixthF = static_cast<double>(1.0f / 6.0f);

// Forward ops: functional, in place (where eager has one) and out=.
#define ACT_FO(NAME, PARAMS, ARGS, EXPR)                             \
  LT NAME##_lz(const Tensor& a UNPAREN PARAMS) {                     \
    LT x = up(a);                                                    \
    return down(EXPR, a);                                            \
  }                                                                  \
  [[maybe_unused]] Tensor NAME##_f(const Tensor& a UNPAREN PARAMS) { \
    return wrap(NAME##_lz(a UNPAREN ARGS));                          \
  }                                                                  \
  Tensor& NAME##_o(const Tensor& a UNPAREN PARAMS, Tensor& out) {    \
    return math_out(out, NAME##_lz(a UNPAREN ARGS));                 \
  }
#define ACT(NAME, PARAMS, ARGS, EXPR) \
  ACT_FO(NAME, PARAMS, ARGS, EXPR)    \
  Tensor& NAME##_i(Tensor& a UNPAREN PARAMS) { return math_inplace(a, NAME##_lz(a UNPAREN ARGS)); }
#define UNPAREN(...) __VA_ARGS__

ACT(leaky_relu, (, const c10::Scalar& s), (, s), where(x.gt(0), x, x.mul(dbl(s))))
ACT(elu, (, const c10::Scalar& al, const c10::Scalar& sc, const c10::Scalar& is), (, al, sc, is),
    where(x.le(0), lazyx::expm1(x.mul(dbl(is))).mul(dbl(al) * dbl(sc)), x.mul(dbl(sc))))
ACT(hardtanh, (, const c10::Scalar& lo, const c10::Scalar& hi), (, lo, hi),
    x.clamp(to_lz(lo), to_lz(hi)))
ACT(hardswish, (), (), x.mul(x.add(3.0).clamp(0.0, 6.0)).div(6.0))
ACT(hardsigmoid, (), (), x.add(3.0).clamp(0.0, 6.0).div(6.0))
ACT(mish, (), (), x.mul(lazyx::log1p(x.exp()).tanh()))
ACT(silu, (), (), x.mul(x.sigmoid()))
ACT(threshold, (, const c10::Scalar& th, const c10::Scalar& v), (, th, v),
    where(x.le(to_lz(th)), to_lz(v), x))
ACT_FO(softplus, (, const c10::Scalar& b, const c10::Scalar& th), (, b, th),
       where(x.mul(dbl(b)).gt(dbl(th)), x, lazyx::log1p(x.mul(dbl(b)).exp()).div(dbl(b))))
ACT_FO(softshrink, (, const c10::Scalar& l), (, l),
       where(x.gt(dbl(l)), x.sub(dbl(l)), where(x.lt(-dbl(l)), x.add(dbl(l)), x.mul(0.0))))
ACT_FO(hardshrink, (, const c10::Scalar& l), (, l),
       where(x.ge(-dbl(l)).logical_and(x.le(dbl(l))), Scalar(0.0), x))
#undef ACT
#undef ACT_FO

LT logit_lz(const Tensor& a, optional<double> eps) {
  LT x = up(a);
  if (!lazyx::is_floating(x.dtype())) x = x.to(lazyx::kFloat32);  // integers give float32
  if (!a.is_floating_point()) {
    if (eps.has_value()) x = x.clamp(*eps, 1.0 - *eps);
    return x.div(Scalar(1.0) - x).log();
  }
  if (eps.has_value()) x = x.clamp(*eps, 1.0 - *eps);
  return down(x.div(Scalar(1.0) - x).log(), a);
}
Tensor logit_f(const Tensor& a, optional<double> eps) { return wrap(logit_lz(a, eps)); }
Tensor& logit_i(Tensor& a, optional<double> eps) { return math_inplace(a, logit_lz(a, eps)); }
Tensor& logit_o(const Tensor& a, optional<double> eps, Tensor& out) {
  return math_out(out, logit_lz(a, eps));
}

// Backward ops: grad and the saved input (or result), in float32 for 16-bit inputs.
#define BWD(NAME, PARAMS, EXPR)                                        \
  Tensor NAME(const Tensor& grad, const Tensor& self UNPAREN PARAMS) { \
    LT g = up(grad), x = up(self);                                     \
    return wrap(down(EXPR, grad));                                     \
  }
BWD(leaky_relu_backward, (, const c10::Scalar& s, bool), where(x.gt(0), g, g.mul(dbl(s))))
BWD(hardtanh_backward, (, const c10::Scalar& lo, const c10::Scalar& hi),
    where(x.le(to_lz(lo)).logical_or(x.ge(to_lz(hi))), Scalar(0.0), g))
// torch 2.x: 0 up to and including -3, grad from 3 on, grad * (x / 3 + 1/2) between.
BWD(hardswish_backward, (),
    where(x.le(-3.0), Scalar(0.0), where(x.lt(3.0), g.mul(x.div(3.0).add(0.5)), g)))
BWD(hardsigmoid_backward, (),
    where(x.gt(-3.0).logical_and(x.lt(3.0)), g.mul(kOneSixthF), Scalar(0.0)))
BWD(softshrink_backward, (, const c10::Scalar& l),
    where(x.ge(-dbl(l)).logical_and(x.le(dbl(l))), Scalar(0.0), g))
BWD(hardshrink_backward, (, const c10::Scalar& l),
    where(x.ge(-dbl(l)).logical_and(x.le(dbl(l))), Scalar(0.0), g))
BWD(softplus_backward, (, const c10::Scalar& b, const c10::Scalar& th),
    where(x.mul(dbl(b)).gt(dbl(th)), g,
          g.mul(x.mul(dbl(b)).exp()).div(x.mul(dbl(b)).exp().add(1.0))))
#undef BWD
#undef UNPAREN

Tensor mish_backward(const Tensor& grad, const Tensor& self) {
  LT g = up(grad), x = up(self);
  LT ts = lazyx::log1p(x.exp()).tanh();
  LT r = g.mul(ts.add(x.mul(x.sigmoid()).mul(Scalar(1.0) - ts.mul(ts))));
  return wrap(down(r, grad));
}
Tensor elu_backward(const Tensor& grad, const c10::Scalar& al, const c10::Scalar& sc,
                    const c10::Scalar& is, bool is_result, const Tensor& self_or_result) {
  LT g = up(grad), x = up(self_or_result);
  double neg = dbl(al) * dbl(sc), pos = dbl(sc), ipt = dbl(is);
  LT negative = is_result ? g.mul(ipt).mul(x.add(neg)) : g.mul(ipt * neg).mul(x.mul(ipt).exp());
  return wrap(down(where(x.le(0), negative, g.mul(pos)), grad));
}
Tensor logit_backward(const Tensor& grad, const Tensor& self, optional<double> eps) {
  LT g = up(grad), x = up(self);
  LT d = g.div(x.mul(Scalar(1.0) - x));
  LT r = eps.has_value() ? where(x.lt(*eps).logical_or(x.gt(1.0 - *eps)), Scalar(0.0), d)
                         : where(x.lt(0).logical_or(x.gt(1)), Scalar(NAN), d);
  return wrap(down(r, grad));
}

std::tuple<Tensor, Tensor> log_sigmoid_forward(const Tensor& a) {
  LT x = up(a);
  LT r = lazyx::minimum(x, lazyx::zeros({}, x.dtype())).sub(lazyx::log1p(x.abs().neg().exp()));
  // The buffer eager's CPU kernel leaves unused: empty.
  return {wrap(down(r, a)), wrap(lazyx::zeros({0}, to_lz(a.scalar_type())))};
}
Tensor log_sigmoid_backward(const Tensor& grad, const Tensor& self, const Tensor&) {
  LT g = up(grad), x = up(self);
  LT z = x.abs().neg().exp();
  LT frac = z.div(z.add(1.0));
  LT r = where(x.lt(0), g.mul(Scalar(1.0) - frac), g.mul(frac));
  return wrap(down(r, grad));
}

// glu: first half times the sigmoid of the second, along `dim`.
Tensor glu(const Tensor& a, int64_t dim) {
  LT x = up(a);
  int64_t d = wrap_dim(dim, a.dim());
  TORCH_CHECK(a.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ",
              a.size(d));
  int64_t h = a.size(d) / 2;
  return wrap(down(x.narrow(d, 0, h).mul(x.narrow(d, h, h).sigmoid()), a));
}
Tensor glu_backward(const Tensor& grad, const Tensor& a, int64_t dim) {
  LT g = up(grad), x = up(a);
  int64_t d = wrap_dim(dim, a.dim());
  int64_t h = a.size(d) / 2;
  LT first = x.narrow(d, 0, h), s = x.narrow(d, h, h).sigmoid();
  LT ga = g.mul(s), gb = g.mul(first).mul(s).mul(Scalar(1.0) - s);
  return wrap(down(lazyx::cat({ga, gb}, d), grad));
}

// prelu is composite since torch 2.0: it reshapes the weight to broadcast over self (same rank,
// channels in dim 1) and calls _prelu_kernel, whose backward is _prelu_kernel_backward. Kernels
// sit on those two, so autograd keeps prelu's gradient.
Tensor prelu_kernel(const Tensor& a, const Tensor& w) {
  LT x = up(a), wb = up(w);
  return wrap(down(where(x.gt(0), x, x.mul(wb)), a));
}
std::tuple<Tensor, Tensor> prelu_kernel_backward(const Tensor& grad, const Tensor& a,
                                                 const Tensor& w) {
  LT g = up(grad), x = up(a), wb = up(w);
  LT gi = where(x.gt(0), g, g.mul(wb));
  LT gw_full = where(x.gt(0), Scalar(0.0), x.mul(g));
  // The weight's gradient sums over the dims the weight was broadcast along.
  std::vector<int64_t> dims;
  const int64_t lead = a.dim() - w.dim();
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (k < lead || (w.size(k - lead) == 1 && a.size(k) != 1)) dims.push_back(k);
  }
  LT gw = dims.empty() ? gw_full : gw_full.sum(dims, true);
  return {wrap(down(gi, a)), wrap(down(gw.reshape(lz(w).sizes()), w))};
}

// rrelu: eval mode is leaky_relu with the mean slope; training draws a slope per negative
// element into `noise` (1 elsewhere).
LT rrelu_lz(const Tensor& a, const Tensor& noise, const c10::Scalar& lo, const c10::Scalar& hi,
            bool training, optional<at::Generator> gen) {
  LT x = up(a);
  if (!training) return down(where(x.gt(0), x, x.mul((dbl(lo) + dbl(hi)) / 2)), a);
  seed_from_torch(gen);
  LT u = lazyx::rand(x.sizes(), x.dtype()).mul(dbl(hi) - dbl(lo)).add(dbl(lo));
  LT n = where(x.le(0), u, Scalar(1.0));
  LT nt = lz(noise);
  nt.copy_(n);
  return down(x.mul(n), a);
}
Tensor rrelu_with_noise(const Tensor& a, Tensor& noise, const c10::Scalar& lo,
                        const c10::Scalar& hi, bool training, optional<at::Generator> gen) {
  return wrap(rrelu_lz(a, noise, lo, hi, training, gen));
}
Tensor& rrelu_with_noise_(Tensor& a, Tensor& noise, const c10::Scalar& lo,
                          const c10::Scalar& hi, bool training, optional<at::Generator> gen) {
  return math_inplace(a, rrelu_lz(a, noise, lo, hi, training, gen));
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
#define REG_FO(NAME)              \
  impl(m, #NAME, LZ_FN(NAME##_f)); \
  impl(m, #NAME ".out", LZ_FN(NAME##_o));
#define REG(NAME) \
  REG_FO(NAME)    \
  impl(m, #NAME "_", LZ_FN(NAME##_i));
  REG(leaky_relu)
  REG(elu)
  REG(hardtanh) REG(hardswish) REG(hardsigmoid) REG(mish) REG(threshold) REG(logit) REG_FO(softplus)
      REG_FO(softshrink) REG_FO(hardshrink)
#undef REG
#undef REG_FO
      // silu itself and silu_backward are in kernels_elementwise.cpp.
      impl(m, "silu_", LZ_FN(silu_i));
  impl(m, "silu.out", LZ_FN(silu_o));
  impl(m, "leaky_relu_backward", LZ_FN(leaky_relu_backward));
  impl(m, "hardtanh_backward", LZ_FN(hardtanh_backward));
  impl(m, "hardswish_backward", LZ_FN(hardswish_backward));
  impl(m, "hardsigmoid_backward", LZ_FN(hardsigmoid_backward));
  impl(m, "softshrink_backward", LZ_FN(softshrink_backward));
  impl(m, "hardshrink_backward", LZ_FN(hardshrink_backward));
  impl(m, "softplus_backward", LZ_FN(softplus_backward));
  impl(m, "mish_backward", LZ_FN(mish_backward));
  impl(m, "elu_backward", LZ_FN(elu_backward));
  impl(m, "logit_backward", LZ_FN(logit_backward));
  impl(m, "log_sigmoid_forward", LZ_FN(log_sigmoid_forward));
  impl(m, "log_sigmoid_backward", LZ_FN(log_sigmoid_backward));
  impl(m, "glu", LZ_FN(glu));
  impl(m, "glu_backward", LZ_FN(glu_backward));
  impl(m, "_prelu_kernel", LZ_FN(prelu_kernel));
  impl(m, "_prelu_kernel_backward", LZ_FN(prelu_kernel_backward));
  impl(m, "rrelu_with_noise", LZ_FN(rrelu_with_noise));
  impl(m, "rrelu_with_noise_", LZ_FN(rrelu_with_noise_));
}

}  // namespace

}  // namespace lazyx_bridge
