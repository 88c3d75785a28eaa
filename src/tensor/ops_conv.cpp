// Convolutions and their gradients: shape inference and checks; one Conv* node each.
#include <string>

#include "backends/conv_geom.h"
#include "lazyx/conv.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

std::string conv_name(size_t rank, bool transposed) {
  const std::string k = rank >= 3 && rank <= 5 ? std::to_string(rank - 2) : "";
  return (transposed ? "conv_transpose" : "conv") + k + (k.empty() ? "" : "d");
}

std::string list_str(const std::vector<int64_t>& v) { return ir::shape_str(v); }

// One option list expanded to k values (empty: `def`; one value: repeated).
std::vector<int64_t> expand(const std::string& name, const char* what,
                            const std::vector<int64_t>& v, int k, int64_t def, int64_t min) {
  std::vector<int64_t> r;
  if (v.empty())
    r.assign(k, def);
  else if (v.size() == 1)
    r.assign(k, v[0]);
  else if (static_cast<int>(v.size()) == k)
    r = v;
  else {
    ir::fail(name.c_str(), std::string(what) + " has " + std::to_string(v.size()) + " values for " +
                               std::to_string(k) + " spatial dims; give one value or one per dim.");
  }
  for (int64_t x : r) {
    if (x < min) {
      ir::fail(name.c_str(), std::string(what) + " " + list_str(r) + " must be >= " +
                                 std::to_string(min) + " in every dim; fix the argument.");
    }
  }
  return r;
}

conv::ConvAttrs make_attrs(const std::string& name, const ConvOptions& o, int k) {
  conv::ConvAttrs a;
  a.k = k;
  a.stride = expand(name, "stride", o.stride, k, 1, 1);
  a.padding = expand(name, "padding", o.padding, k, 0, 0);
  a.dilation = expand(name, "dilation", o.dilation, k, 1, 1);
  a.output_padding = expand(name, "output_padding", o.output_padding, k, 0, 0);
  a.groups = o.groups;
  a.transposed = o.transposed;
  if (a.groups < 1) {
    ir::fail(name.c_str(), "groups must be positive, got " + std::to_string(a.groups) + ".");
  }
  for (int d = 0; d < k; ++d) {
    const int64_t op = a.output_padding[d];
    if (!a.transposed && op != 0) {
      ir::fail(name.c_str(), "output_padding " + list_str(a.output_padding) +
                                 " is only for transposed convolutions; pass zeros.");
    }
    if (op >= a.stride[d] && op >= a.dilation[d]) {
      ir::fail(name.c_str(), "output_padding " + list_str(a.output_padding) +
                                 " must be smaller than the stride or the dilation in every dim.");
    }
  }
  return a;
}

void check_operands(const std::string& name, const Shape& x, Dtype xd, const Shape& w, Dtype wd) {
  if (x.size() < 3 || x.size() > 5) {
    ir::fail(name.c_str(), "expected a 3-D, 4-D or 5-D input (N, C, *spatial), got " +
                               ir::shape_str(x) + "; add a batch dim with unsqueeze(0).");
  }
  if (w.size() != x.size()) {
    ir::fail(name.c_str(), "weight " + ir::shape_str(w) + " must have as many dims as input " +
                               ir::shape_str(x) + ".");
  }
  if (xd != wd) {
    ir::fail(name.c_str(), std::string("input and weight must have the same dtype, got ") +
                               dtype_name(xd) + " and " + dtype_name(wd) + "; cast one.");
  }
  check_dtype(name.c_str(), xd, false, true, true);
}

// The output shape of the convolution of input shape x with weight shape w.
Shape out_shape(const std::string& name, const Shape& x, const Shape& w, const conv::ConvAttrs& a) {
  const int64_t G = a.groups;
  const int64_t cin = x[1];
  const int64_t wc_in = a.transposed ? w[0] : w[1] * G;
  const int64_t cout = a.transposed ? w[1] * G : w[0];
  if (cin != wc_in || w[0] % G != 0) {
    ir::fail(name.c_str(),
             "input " + ir::shape_str(x) + " has " + std::to_string(cin) + " channels but weight " +
                 ir::shape_str(w) + " with groups=" + std::to_string(G) + " expects " +
                 std::to_string(wc_in) + " (and its dim 0 divisible by groups); fix the shapes.");
  }
  Shape out{x[0], cout};
  for (int d = 0; d < a.k; ++d) {
    const int64_t in = x[2 + d], kr = a.dilation[d] * (w[2 + d] - 1) + 1;
    const int64_t s = a.stride[d], p = a.padding[d];
    int64_t o = 0;
    if (a.transposed)
      o = (in - 1) * s - 2 * p + kr + a.output_padding[d];
    else
      o = in + 2 * p >= kr ? (in + 2 * p - kr) / s + 1 : 0;
    if (o < 1 || w[2 + d] < 1) {
      ir::fail(name.c_str(), "spatial dim " + std::to_string(d) + " of input " + ir::shape_str(x) +
                                 " gives no output with kernel " + ir::shape_str(w) + ", padding " +
                                 list_str(a.padding) + ", dilation " + list_str(a.dilation) +
                                 "; use a larger input or more padding.");
    }
    out.push_back(o);
  }
  return out;
}

ir::Attrs node_attrs(const conv::ConvAttrs& a) {
  ir::Attrs at;
  at.ints = conv::pack_attrs(a);
  return at;
}

Tensor conv_impl(const std::string& name, const Tensor& input, const Tensor& weight,
                 const std::optional<Tensor>& bias, const ConvOptions& o) {
  EngineLock lock(engine_mutex());
  ir::NodePtr x = impl_of(name.c_str(), input).value(name.c_str());
  ir::NodePtr w = impl_of(name.c_str(), weight).value(name.c_str());
  check_operands(name, x->shape(), x->dtype(), w->shape(), w->dtype());
  const conv::ConvAttrs a = make_attrs(name, o, static_cast<int>(x->shape().size()) - 2);
  const Shape out = out_shape(name, x->shape(), w->shape(), a);
  Tensor r = make_tensor(ir::make_node(Op::Conv, x->dtype(), out, {x, w}, node_attrs(a)));
  if (!bias) return r;
  const Shape& b = impl_of(name.c_str(), *bias).sizes();
  if (b != Shape{out[1]} || bias->dtype() != x->dtype()) {
    ir::fail(name.c_str(), "bias must have shape [" + std::to_string(out[1]) + "] and dtype " +
                               dtype_name(x->dtype()) + ", got " + ir::shape_str(b) + " " +
                               dtype_name(bias->dtype()) + ".");
  }
  Shape bs(out.size(), 1);
  bs[1] = out[1];
  return r + bias->reshape(bs);
}

// Checks a gradient's operands: grad_out must be the output of input_shape * weight_shape.
conv::ConvAttrs check_backward(const std::string& name, const Shape& go, Dtype god, const Shape& x,
                               Dtype xd, const Shape& w, const ConvOptions& o) {
  check_operands(name, x, xd, w, god);
  const conv::ConvAttrs a = make_attrs(name, o, static_cast<int>(x.size()) - 2);
  const Shape out = out_shape(name, x, w, a);
  if (go != out) {
    ir::fail(name.c_str(), "grad_out " + ir::shape_str(go) + " must have the output shape " +
                               ir::shape_str(out) + " of input " + ir::shape_str(x) +
                               " and weight " + ir::shape_str(w) + ".");
  }
  return a;
}

}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const ConvOptions& options) {
  const std::string name = conv_name(input.shape().size(), options.transposed);
  return conv_impl(name, input, weight, bias, options);
}

Tensor convolution_backward_input(const Tensor& grad_out, const Tensor& weight,
                                  const Shape& input_shape, const ConvOptions& options) {
  EngineLock lock(engine_mutex());
  const std::string name = conv_name(input_shape.size(), options.transposed) + "_backward";
  ir::NodePtr g = impl_of(name.c_str(), grad_out).value(name.c_str());
  ir::NodePtr w = impl_of(name.c_str(), weight).value(name.c_str());
  const conv::ConvAttrs a =
      check_backward(name, g->shape(), g->dtype(), input_shape, w->dtype(), w->shape(), options);
  return make_tensor(
      ir::make_node(Op::ConvBackwardInput, g->dtype(), input_shape, {g, w}, node_attrs(a)));
}

Tensor convolution_backward_weight(const Tensor& grad_out, const Tensor& input,
                                   const Shape& weight_shape, const ConvOptions& options) {
  EngineLock lock(engine_mutex());
  const std::string name = conv_name(weight_shape.size(), options.transposed) + "_backward";
  ir::NodePtr g = impl_of(name.c_str(), grad_out).value(name.c_str());
  ir::NodePtr x = impl_of(name.c_str(), input).value(name.c_str());
  const conv::ConvAttrs a =
      check_backward(name, g->shape(), g->dtype(), x->shape(), x->dtype(), weight_shape, options);
  return make_tensor(
      ir::make_node(Op::ConvBackwardWeight, g->dtype(), weight_shape, {g, x}, node_attrs(a)));
}

namespace {
Tensor conv_nd(int k, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               ConvOptions o) {
  const std::string name = conv_name(static_cast<size_t>(k) + 2, o.transposed);
  if (input.shape().size() != static_cast<size_t>(k) + 2) {
    ir::fail(name.c_str(), "expected a " + std::to_string(k + 2) +
                               "-D input (N, C, *spatial), got " + ir::shape_str(input.shape()) +
                               ".");
  }
  return conv_impl(name, input, weight, bias, o);
}
}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              ConvOptions options) {
  return conv_nd(1, input, weight, bias, std::move(options));
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              ConvOptions options) {
  return conv_nd(2, input, weight, bias, std::move(options));
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              ConvOptions options) {
  return conv_nd(3, input, weight, bias, std::move(options));
}

}  // namespace lazyx
