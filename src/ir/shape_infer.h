// Shape and dtype inference shared by the ops. Errors name the op and the shapes involved.
#pragma once

#include <string>
#include <vector>

#include "lazyx/dtype.h"
#include "lazyx/tensor.h"

namespace lazyx::ir {

std::string shape_str(const Shape& s);
[[noreturn]] void fail(const char* op, const std::string& msg);

// PyTorch broadcasting of two shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0 as PyTorch does.
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);
// Sorted unique wrapped dims; empty means all.
std::vector<int64_t> wrap_dims(const char* op, const std::vector<int64_t>& dims, int64_t rank);
Shape reduce_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim);

// torch.result_type over operands: dimensioned tensors beat 0-d tensors beat host scalars,
// each only within a higher category (bool < integral < floating).
struct PromotionInput {
  Dtype dtype;
  int kind;  // 0 = tensor with dims, 1 = 0-d tensor, 2 = host scalar
};
Dtype result_type(const PromotionInput* inputs, size_t n);

}  // namespace lazyx::ir
