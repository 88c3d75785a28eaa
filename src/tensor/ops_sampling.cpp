// Grid sampling, segment reductions and histograms (lazyx/sampling.h): the IR ops GridSample,
// GridSampleBackward, SegmentReduce, SegmentReduceBackward and Histogram. 16-bit floats compute
// in float32.
#include <cmath>
#include <string>

#include "lazyx/ops.h"
#include "lazyx/sampling.h"
#include "tensor/ops_common.h"
#include "tensor/pool_taps.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

Tensor node_op(Op op, Dtype dtype, const Shape& shape, const std::vector<Tensor>& operands,
               ir::Attrs attrs, ir::NodePtr extra = nullptr) {
  EngineLock lock(engine_mutex());
  const char* name = ir::op_name(op);
  std::vector<ir::NodePtr> nodes;
  for (const Tensor& t : operands) nodes.push_back(impl_of(name, t).value(name));
  if (extra) nodes.push_back(std::move(extra));
  return make_tensor(ir::make_node(op, dtype, shape, std::move(nodes), std::move(attrs)));
}

Tensor in_dtype(const Tensor& t, Dtype d) { return t.dtype() == d ? t : t.to(d); }

void check_grid(const char* op, const Tensor& input, const Tensor& grid) {
  if (input.dim() != 4 || grid.dim() != 4 || grid.size(3) != 2) {
    ir::fail(op, "expected input [N, C, H, W] and grid [N, Ho, Wo, 2], got " +
                     ir::shape_str(input.shape()) + " and " + ir::shape_str(grid.shape()) +
                     "; 2-D sampling only.");
  }
  if (input.size(0) != grid.size(0)) {
    ir::fail(op, "input and grid have batch sizes " + std::to_string(input.size(0)) + " and " +
                     std::to_string(grid.size(0)) + "; pass one grid per input.");
  }
  if (!is_floating(input.dtype()) || input.dtype() != grid.dtype()) {
    ir::fail(op, std::string("expected floating point input and grid of one dtype, got ") +
                     dtype_name(input.dtype()) + " and " + dtype_name(grid.dtype()) +
                     "; convert them first.");
  }
  if (input.size(2) <= 0 || input.size(3) <= 0) {
    ir::fail(op, "input " + ir::shape_str(input.shape()) +
                     " has empty spatial dims; pass H and W of at least 1.");
  }
}

ir::Attrs grid_attrs(GridMode mode, GridPadding padding, bool align_corners) {
  ir::Attrs a;
  a.ints = {static_cast<int64_t>(mode), static_cast<int64_t>(padding), align_corners ? 1 : 0};
  return a;
}

Tensor grid_backward(const char* op, int64_t which, const Tensor& grad_out, const Tensor& input,
                     const Tensor& grid, GridMode mode, GridPadding padding, bool align) {
  check_grid(op, input, grid);
  const Shape want = {input.size(0), input.size(1), grid.size(1), grid.size(2)};
  if (grad_out.shape() != want) {
    ir::fail(op, "grad_out has shape " + ir::shape_str(grad_out.shape()) + ", expected " +
                     ir::shape_str(want) + "; pass the gradient of grid_sample's output.");
  }
  const Dtype cd = compute_dtype(input.dtype());
  ir::Attrs a = grid_attrs(mode, padding, align);
  a.i0 = which;
  const Shape& shape = which == 0 ? input.shape() : grid.shape();
  Tensor r = node_op(Op::GridSampleBackward, cd, shape,
                     {in_dtype(grad_out, cd), in_dtype(input, cd), in_dtype(grid, cd)}, a);
  return in_dtype(r, input.dtype());
}

}  // namespace

Tensor grid_sample(const Tensor& input, const Tensor& grid, GridMode mode, GridPadding padding,
                   bool align_corners) {
  const char* op = "grid_sample";
  check_grid(op, input, grid);
  const Dtype cd = compute_dtype(input.dtype());
  Tensor r =
      node_op(Op::GridSample, cd, {input.size(0), input.size(1), grid.size(1), grid.size(2)},
              {in_dtype(input, cd), in_dtype(grid, cd)}, grid_attrs(mode, padding, align_corners));
  return in_dtype(r, input.dtype());
}

Tensor grid_sample_backward_input(const Tensor& grad_out, const Tensor& input, const Tensor& grid,
                                  GridMode mode, GridPadding padding, bool align_corners) {
  return grid_backward("grid_sample_backward", 0, grad_out, input, grid, mode, padding,
                       align_corners);
}

Tensor grid_sample_backward_grid(const Tensor& grad_out, const Tensor& input, const Tensor& grid,
                                 GridMode mode, GridPadding padding, bool align_corners) {
  return grid_backward("grid_sample_backward", 1, grad_out, input, grid, mode, padding,
                       align_corners);
}

namespace {

// data viewed as [O, N, I] around `axis`, and offsets as [O, S + 1], checked.
struct SegView {
  int64_t axis, O, N, I, S;
};

SegView seg_view(const char* op, const Tensor& data, const Tensor& offsets, int64_t axis) {
  if (!is_floating(data.dtype())) {
    ir::fail(op, std::string("expected floating point data, got ") + dtype_name(data.dtype()) +
                     "; convert it with .to(float32) first.");
  }
  if (offsets.dtype() != kInt64) ir::fail(op, "offsets must be an int64 tensor; call .to(kInt64).");
  SegView v;
  v.axis = ir::wrap_dim(op, axis, data.dim());
  if (data.dim() == 0 || offsets.dim() != v.axis + 1 || offsets.size(v.axis) < 1) {
    ir::fail(op, "offsets " + ir::shape_str(offsets.shape()) + " do not match data " +
                     ir::shape_str(data.shape()) + " at axis " + std::to_string(v.axis) +
                     "; lengths need data's dims before the axis, then one entry per segment.");
  }
  v.O = 1;
  v.I = 1;
  for (int64_t d = 0; d < v.axis; ++d) {
    if (offsets.size(d) != data.size(d)) {
      ir::fail(op, "offsets " + ir::shape_str(offsets.shape()) + " do not match data " +
                       ir::shape_str(data.shape()) + " in dim " + std::to_string(d) +
                       "; lengths need data's dims before the axis.");
    }
    v.O *= data.size(d);
  }
  for (int64_t d = v.axis + 1; d < data.dim(); ++d) v.I *= data.size(d);
  v.N = data.size(v.axis);
  v.S = offsets.size(v.axis) - 1;
  return v;
}

ir::Attrs seg_attrs(SegmentKind kind, const std::optional<double>& initial, bool safe) {
  ir::Attrs a;
  a.ints = {static_cast<int64_t>(kind), initial.has_value() ? 1 : 0, safe ? 1 : 0};
  return a;
}

Shape seg_shape(const Tensor& data, const SegView& v) {
  Shape s = data.shape();
  s[v.axis] = v.S;
  return s;
}

}  // namespace

Tensor segment_reduce(const Tensor& data, const Tensor& offsets, SegmentKind kind, int64_t axis,
                      std::optional<double> initial, bool safe) {
  const char* op = "segment_reduce";
  const SegView v = seg_view(op, data, offsets, axis);
  const Dtype cd = compute_dtype(data.dtype());
  Tensor x = in_dtype(data, cd).reshape({v.O, v.N, v.I});
  Tensor off = offsets.reshape({v.O, v.S + 1});
  Tensor r =
      node_op(Op::SegmentReduce, cd, {v.O, v.S, v.I}, {x, off}, seg_attrs(kind, initial, safe),
              scalar_node(Scalar(initial.value_or(0.0)), kFloat64));
  return in_dtype(r.reshape(seg_shape(data, v)), data.dtype());
}

Tensor segment_reduce_backward(const Tensor& grad, const Tensor& output, const Tensor& data,
                               const Tensor& offsets, SegmentKind kind, int64_t axis,
                               std::optional<double> initial) {
  const char* op = "segment_reduce_backward";
  const SegView v = seg_view(op, data, offsets, axis);
  const Shape out_shape = seg_shape(data, v);
  if (grad.shape() != out_shape || output.shape() != out_shape) {
    ir::fail(op, "grad " + ir::shape_str(grad.shape()) + " and output " +
                     ir::shape_str(output.shape()) + " must both have shape " +
                     ir::shape_str(out_shape) + "; pass segment_reduce's output and its gradient.");
  }
  const Dtype cd = compute_dtype(data.dtype());
  auto flat = [&](const Tensor& t, int64_t n) { return in_dtype(t, cd).reshape({v.O, n, v.I}); };
  Tensor r = node_op(
      Op::SegmentReduceBackward, cd, {v.O, v.N, v.I},
      {flat(grad, v.S), flat(output, v.S), flat(data, v.N), offsets.reshape({v.O, v.S + 1})},
      seg_attrs(kind, initial, false), scalar_node(Scalar(initial.value_or(0.0)), kFloat64));
  return in_dtype(r.reshape(data.shape()), data.dtype());
}

namespace {

// Counts in the bins of `edges` (x's dtype), and their density: the counts divided by their
// total and by the bin widths.
std::pair<Tensor, Tensor> histogram_with(const Tensor& x, const Tensor& edges, const Tensor& weight,
                                         bool density, bool linear) {
  const char* op = "histogram";
  if (!is_floating(x.dtype()) || edges.dtype() != x.dtype() || edges.dim() != 1 ||
      edges.numel() < 1) {
    ir::fail(op, std::string("expected floating point input and 1-D bins of its dtype, got ") +
                     dtype_name(x.dtype()) + " and " + dtype_name(edges.dtype()) +
                     ir::shape_str(edges.shape()) + "; convert them first.");
  }
  if (weight.defined() && (weight.shape() != x.shape() || weight.dtype() != x.dtype())) {
    ir::fail(op, "weight " + ir::shape_str(weight.shape()) + " must have input's shape " +
                     ir::shape_str(x.shape()) + " and dtype; pass one weight per element.");
  }
  const Dtype cd = compute_dtype(x.dtype());
  const int64_t M = x.numel(), B = edges.numel() - 1;
  std::vector<Tensor> operands = {in_dtype(x, cd).reshape({M}), in_dtype(edges, cd)};
  if (weight.defined()) operands.push_back(in_dtype(weight, cd).reshape({M}));
  ir::Attrs a;
  a.i0 = linear ? 1 : 0;
  Tensor hist = node_op(Op::Histogram, cd, {B}, operands, a);
  if (density) {
    Tensor widths = edges.narrow(0, 1, B).to(cd).sub(edges.narrow(0, 0, B).to(cd));
    hist = hist.div(hist.sum()).div(widths);
  }
  return {in_dtype(hist, x.dtype()), edges.clone()};
}

}  // namespace

std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& edges, const Tensor& weight,
                                    bool density) {
  return histogram_with(x, edges, weight, density, false);
}

std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const Tensor& weight, bool density) {
  const char* op = "histogram";
  if (bins <= 0) ir::fail(op, "bins must be > 0, got " + std::to_string(bins) + ".");
  if (!is_floating(x.dtype())) {
    ir::fail(op, std::string("expected a floating point input, got ") + dtype_name(x.dtype()) +
                     "; convert it with .to(float32) first.");
  }
  const Dtype dt = x.dtype();
  Tensor lo, hi;
  if (range.has_value() || x.numel() == 0) {
    double l = range ? range->first : 0.0, h = range ? range->second : 1.0;  // empty: [0, 1]
    if (!(std::isfinite(l) && std::isfinite(h)) || l > h) {
      ir::fail(op, "range [" + std::to_string(l) + ", " + std::to_string(h) +
                       "] must be finite with min <= max; pass a valid range.");
    }
    if (l == h) {
      l -= 0.5;
      h += 0.5;
    }
    lo = full({}, l, dt);
    hi = full({}, h, dt);
  } else {
    lo = x.amin();
    hi = x.amax();
    Tensor same = lo.eq(hi);
    lo = where(same, lo.sub(0.5), lo);
    hi = where(same, hi.add(0.5), hi);
  }
  // torch.linspace: the first half counts up from lo, the second half down from hi.
  Tensor i = arange(0, bins + 1, 1, dt);
  Tensor step = hi.sub(lo).div(static_cast<double>(bins));
  Tensor up = lo.add(step.mul(i));
  Tensor down = hi.sub(step.mul(full({}, static_cast<double>(bins), dt).sub(i)));
  Tensor edges = where(i.lt(static_cast<double>((bins + 1) / 2)), up, down);
  return histogram_with(x, edges, weight, density, true);
}

}  // namespace lazyx
