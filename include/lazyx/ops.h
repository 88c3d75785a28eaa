// Free-function ops: creation, random numbers, and ops over several tensors.
#pragma once

#include <optional>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx {

// Creation. `tensor` uploads host values now; the others are lazy.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape);
template <typename T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())});
}
// Copies numel(shape) elements of `dtype` from host memory into a new tensor (for bridges).
Tensor from_host(const void* data, const Shape& shape, Dtype dtype);
Tensor zeros(const Shape& shape, Dtype dtype = kFloat32);
Tensor ones(const Shape& shape, Dtype dtype = kFloat32);
Tensor full(const Shape& shape, Scalar value, std::optional<Dtype> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<Dtype> dtype = std::nullopt);
// A 0-d tensor from a process-wide constant cache: the same value is uploaded once and shared,
// so its buffer is never donated (rule 1c of ALIASING.md).
Tensor scalar_tensor(Scalar value, std::optional<Dtype> dtype = std::nullopt);

// Random numbers: counter-based, so the seed and offset are run-time operands and a new seed
// every step does not recompile.
void manual_seed(uint64_t seed);
Tensor rand(const Shape& shape, Dtype dtype = kFloat32);
Tensor randn(const Shape& shape, Dtype dtype = kFloat32);
Tensor randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype = kInt64);

// Ops over several tensors.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * (m1 @ m2)
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta = 1,
             Scalar alpha = 1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace lazyx
