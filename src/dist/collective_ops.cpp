// Tracing the collectives: shape inference, validation, and the order token.
#include <algorithm>
#include <cmath>

#include "dist/process_group.h"
#include "ir/shape_infer.h"
#include "tensor/ops_common.h"

namespace lazyx::dist {

using ir::Op;

namespace {

const TensorImpl& operand(const char* op, const Tensor& t) {
  const TensorImpl& i = impl_of(op, t);
  if (i.dtype() == kBool) {
    ir::fail(op, "bool tensors are not supported by collectives; convert to int32 or float first.");
  }
  return i;
}

void check_scale(const char* op, Dtype d, ReduceOp r, double scale) {
  if (r != ReduceOp::Sum && r != ReduceOp::Mean && r != ReduceOp::Max && r != ReduceOp::Min) {
    ir::fail(op, "unknown reduction " + std::to_string(static_cast<int>(r)) +
                     "; use sum, mean, max or min.");
  }
  if (!std::isfinite(scale)) ir::fail(op, "scale must be finite, got " + std::to_string(scale) + ".");
  if (!is_floating(d) && (r == ReduceOp::Mean || scale != 1.0)) {
    ir::fail(op, std::string("mean and scale need a floating tensor, got ") + dtype_name(d) +
                     "; reduce with sum (or convert to float first).");
  }
}

// The collective node, threaded onto the order token; it becomes the new token.
ir::NodePtr collective(Op op, Dtype d, Shape shape, std::vector<ir::NodePtr> operands,
                       ir::Attrs a) {
  ir::NodePtr tok = take_token();
  if (tok) {
    operands.push_back(std::move(tok));
    a.flag = true;
  }
  ir::NodePtr n = ir::make_node(op, d, std::move(shape), std::move(operands), std::move(a));
  set_token(n);
  return n;
}

}  // namespace

std::vector<Tensor> all_reduce(const std::vector<Tensor>& tensors, ReduceOp op, double scale) {
  const char* name = "all_reduce";
  EngineLock lock(engine_mutex());
  group(name);
  // Validate everything first, so a bad tensor changes nothing.
  std::vector<Dtype> dtypes;
  for (const Tensor& t : tensors) {
    const TensorImpl& i = operand(name, t);
    check_scale(name, i.dtype(), op, scale);
    if (std::find(dtypes.begin(), dtypes.end(), i.dtype()) == dtypes.end()) dtypes.push_back(i.dtype());
  }
  std::vector<Tensor> out(tensors.size());
  // One node (one buffer, one Gloo call) per dtype, in order of first appearance.
  for (Dtype d : dtypes) {
    std::vector<size_t> members;
    std::vector<ir::NodePtr> ops;
    int64_t total = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const TensorImpl& i = impl_of(name, tensors[k]);
      if (i.dtype() != d) continue;
      members.push_back(k);
      ops.push_back(i.value(name));
      total += ir::shape_numel(i.sizes());
    }
    const size_t n = members.size();
    ops.push_back(detail::scalar_node(Scalar(scale), kFloat64));
    ir::Attrs a;
    a.i0 = static_cast<int64_t>(op);
    a.ints = {static_cast<int64_t>(n)};
    Shape shape = n == 1 ? impl_of(name, tensors[members[0]]).sizes() : Shape{total};
    ir::NodePtr node = collective(Op::AllReduce, d, shape, std::move(ops), std::move(a));
    if (n == 1) {
      out[members[0]] = make_tensor(node);
      continue;
    }
    // Several tensors: each result is its block of the packed buffer.
    int64_t off = 0;
    for (size_t k : members) {
      const Shape& s = impl_of(name, tensors[k]).sizes();
      ir::Attrs v;
      v.ints = ir::contiguous_strides(s);
      v.i0 = off;
      out[k] = make_tensor(ir::make_node(Op::AsStrided, d, s, {node}, std::move(v)));
      off += ir::shape_numel(s);
    }
  }
  return out;
}

Tensor all_reduce(const Tensor& tensor, ReduceOp op, double scale) {
  return all_reduce(std::vector<Tensor>{tensor}, op, scale)[0];
}

Tensor all_gather(const Tensor& tensor) {
  const char* name = "all_gather";
  EngineLock lock(engine_mutex());
  ProcessGroup& g = group(name);
  const TensorImpl& i = operand(name, tensor);
  Shape shape = i.sizes();
  if (shape.empty()) shape = {1};
  shape[0] *= g.size();
  ir::Attrs a;
  a.i0 = g.size();
  return make_tensor(collective(Op::AllGather, i.dtype(), shape, {i.value(name)}, std::move(a)));
}

Tensor reduce_scatter(const Tensor& tensor, ReduceOp op, double scale) {
  const char* name = "reduce_scatter";
  EngineLock lock(engine_mutex());
  ProcessGroup& g = group(name);
  const TensorImpl& i = operand(name, tensor);
  check_scale(name, i.dtype(), op, scale);
  Shape shape = i.sizes();
  if (shape.empty() || shape[0] % g.size() != 0) {
    ir::fail(name, "dim 0 of " + ir::shape_str(shape) + " must split evenly into " +
                       std::to_string(g.size()) + " blocks, one per rank.");
  }
  shape[0] /= g.size();
  ir::Attrs a;
  a.i0 = static_cast<int64_t>(op);
  return make_tensor(collective(Op::ReduceScatter, i.dtype(), shape,
                                {i.value(name), detail::scalar_node(Scalar(scale), kFloat64)},
                                std::move(a)));
}

Tensor broadcast(const Tensor& tensor, int root) {
  const char* name = "broadcast";
  EngineLock lock(engine_mutex());
  ProcessGroup& g = group(name);
  const TensorImpl& i = operand(name, tensor);
  if (root < 0 || root >= g.size()) {
    ir::fail(name, "root " + std::to_string(root) + " is not a rank of a group of " +
                       std::to_string(g.size()) + ".");
  }
  ir::Attrs a;
  a.i0 = root;
  return make_tensor(collective(Op::Broadcast, i.dtype(), i.sizes(), {i.value(name)}, std::move(a)));
}

}  // namespace lazyx::dist
