// Reductions over dims, and softmax / log_softmax.
#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

Tensor reduce(Op op, const char* name, const Tensor& t, const std::vector<int64_t>& dims,
              bool keepdim, Dtype out) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of(name, t);
  int64_t rank = static_cast<int64_t>(i.sizes().size());
  std::vector<int64_t> wd = ir::wrap_dims(name, dims, rank);
  if (op == Op::Amax || op == Op::Amin || op == Op::Argmax) {
    for (int64_t d : wd) {
      if (i.sizes()[d] == 0) {
        ir::fail(name, "cannot reduce over dimension " + std::to_string(d) + " of size 0 in " +
                           ir::shape_str(i.sizes()) + ": the result has no identity.");
      }
    }
  }
  ir::Attrs a;
  a.ints = wd;
  a.flag = keepdim;
  return make_tensor(
      ir::make_node(op, out, ir::reduce_shape(i.sizes(), wd, keepdim), {i.value(name)}, a));
}

Dtype dtype_of_tensor(const char* op, const Tensor& t) { return impl_of(op, t).dtype(); }

Tensor normalize(Op op, const char* name, const Tensor& t, int64_t dim) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of(name, t);
  check_dtype(name, i.dtype(), false, false, true);
  ir::Attrs a;
  a.i0 = ir::wrap_dim(name, dim, static_cast<int64_t>(i.sizes().size()));
  return make_tensor(ir::make_node(op, i.dtype(), i.sizes(), {i.value(name)}, a));
}

}  // namespace

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  Dtype d = dtype_of_tensor("sum", *this);
  return reduce(Op::Sum, "sum", *this, dims, keepdim, is_floating(d) ? d : kInt64);
}
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  Dtype d = dtype_of_tensor("mean", *this);
  if (!is_floating(d)) {
    ir::fail("mean", std::string("could not infer the output dtype: input dtype ") +
                         dtype_name(d) + " is not floating point. Call .to(kFloat32) first.");
  }
  return reduce(Op::Mean, "mean", *this, dims, keepdim, d);
}
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(Op::Amax, "amax", *this, dims, keepdim, dtype_of_tensor("amax", *this));
}
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(Op::Amin, "amin", *this, dims, keepdim, dtype_of_tensor("amin", *this));
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  Dtype d = dtype_of_tensor("logsumexp", *this);
  return reduce(Op::LogSumExp, "logsumexp", *this, dims, keepdim, is_floating(d) ? d : kFloat32);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("argmax", *this);
  check_dtype("argmax", i.dtype(), false, true, true);
  if (dim) return reduce(Op::Argmax, "argmax", *this, {*dim}, keepdim, kInt64);
  // Over all elements: flatten, then reduce dim 0.
  int64_t n = ir::shape_numel(i.sizes());
  if (n == 0) ir::fail("argmax", "cannot take argmax of an empty tensor.");
  ir::Attrs a;
  a.ints = {0};
  ir::NodePtr flat = reshape_node(i.value("argmax"), {n});
  ir::NodePtr r = ir::make_node(Op::Argmax, kInt64, {}, {flat}, a);
  if (keepdim) r = reshape_node(r, Shape(i.sizes().size(), 1));
  return make_tensor(r);
}
Tensor Tensor::softmax(int64_t dim) const { return normalize(Op::Softmax, "softmax", *this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const {
  return normalize(Op::LogSoftmax, "log_softmax", *this, dim);
}
Tensor softmax(const Tensor& x, int64_t dim) { return x.softmax(dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return x.log_softmax(dim); }

}  // namespace lazyx
