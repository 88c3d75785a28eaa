// Helpers shared by the op families in src/tensor/ops_*.cpp.
#pragma once

#include <initializer_list>

#include "ir/node.h"
#include "ir/shape_infer.h"
#include "tensor/tensor_impl.h"

namespace lazyx::detail {

// An operand of an elementwise op: a tensor or a host scalar, for promotion.
struct Arg {
  ir::NodePtr node;  // null for a host scalar until its dtype is known
  Dtype dtype;
  int kind;  // as ir::PromotionInput
  std::optional<Scalar> scalar;
  const Shape& shape() const;
};

Arg arg(const char* op, const Tensor& t);
Arg arg(Scalar s);
Dtype promote(std::initializer_list<Arg> args);
// Scalars become run-time scalar nodes of dtype `d`.
ir::NodePtr node_of(const Arg& a, Dtype d);

ir::NodePtr scalar_node(Scalar s, Dtype d);
ir::NodePtr cast(ir::NodePtr n, Dtype d);
// A node's value laid out anew in `shape` (same numel).
ir::NodePtr reshape_node(ir::NodePtr n, const Shape& shape);
// `n` broadcast (and converted) to `shape` and `d`.
ir::NodePtr expand_node(ir::NodePtr n, const Shape& shape, Dtype d);

// Elementwise op over tensors/scalars; `out_dtype` overrides the result dtype (comparisons).
ir::NodePtr elementwise(ir::Op op, const char* name, std::initializer_list<Arg> args,
                        std::optional<Dtype> out_dtype = std::nullopt, ir::Attrs attrs = {});

// Runs `value` as an in-place update of `self` (op names end in '_'): checks that the
// result can be cast to self's dtype and keeps self's shape.
Tensor& assign_inplace(const char* op, Tensor& self, ir::NodePtr value);

void check_dtype(const char* op, Dtype d, bool allow_bool, bool allow_int, bool allow_float);
// scatter-like ops: index, src and self of one rank; index within src, and within self except
// along the scattered dim `d`.
void check_scatter_shapes(const char* op, const Shape& self, const Shape& index, const Shape& src,
                          int64_t d);

}  // namespace lazyx::detail
