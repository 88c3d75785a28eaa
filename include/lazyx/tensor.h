// lazyx::Tensor: a cheap handle to a lazy tensor. Copies of a handle are the same tensor.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lazyx/dtype.h"

namespace lazyx {

using Shape = std::vector<int64_t>;

// A host number used as an operand (`x * 3`, `x.add_(g, -lr)`). Its value is passed to the
// program at run time, never baked into the graph, so changing it does not recompile.
class Scalar {
 public:
  Scalar(double v) : f_(v), i_(static_cast<int64_t>(v)), kind_(Kind::Float) {}
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  Scalar(int v) : Scalar(static_cast<long long>(v)) {}
  Scalar(long v) : Scalar(static_cast<long long>(v)) {}
  Scalar(long long v) : f_(static_cast<double>(v)), i_(v), kind_(Kind::Int) {}
  Scalar(bool v) : f_(v), i_(v), kind_(Kind::Bool) {}

  double to_double() const { return f_; }
  int64_t to_int() const { return i_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  // The dtype a wrapped number of this kind takes in promotion (PyTorch's defaults).
  Dtype default_dtype() const;

 private:
  enum class Kind : uint8_t { Bool, Int, Float };
  double f_;
  int64_t i_;
  Kind kind_;
};

class TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // Metadata: never syncs.
  int64_t id() const;
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  const Shape& strides() const;
  int64_t storage_offset() const;
  int64_t size(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  Dtype dtype() const;
  bool is_view() const;
  bool is_contiguous() const;
  bool is_pending() const;  // has work that no sync has run yet

  // Value reads: a partial sync of only what they need. Values convert to T.
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;
  std::string to_string() const;
  // Writes the elements, row-major and in this tensor's dtype, to `dst` (numel * element size
  // bytes). A value read like to_vector, without conversion.
  void copy_to_host(void* dst) const;

  // Copies and conversions.
  Tensor clone() const;
  Tensor to(Dtype dtype) const;
  Tensor contiguous() const;

  // Arithmetic (PyTorch broadcasting and type promotion).
  // An explicit alpha is always a run-time operand, so every value of it shares one program.
  Tensor add(const Tensor& other) const;
  Tensor add(const Tensor& other, Scalar alpha) const;
  Tensor add(Scalar other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(const Tensor& other, Scalar alpha) const;
  Tensor sub(Scalar other, Scalar alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor& add_(const Tensor& other);
  Tensor& add_(const Tensor& other, Scalar alpha);
  Tensor& add_(Scalar other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other);
  Tensor& sub_(const Tensor& other, Scalar alpha);
  Tensor& sub_(Scalar other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& pow_(Scalar exponent);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

  // Unary math.
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor logical_not() const;
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& relu_();
  Tensor& sin_();
  Tensor& cos_();

  // Comparisons and logic: bool results.
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;

  // Reductions over `dims` (all dims when empty).
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // Linear algebra.
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor t() const;

  // Views: share this tensor's storage (reads see later in-place updates, writes update the base).
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor expand(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // Any strided window onto this tensor's storage, as torch.as_strided: `storage_offset` counts
  // elements from the start of the storage. Overlapping windows may be read, not written.
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;
  // The id of the base tensor whose storage this tensor shares (its own id for a base).
  int64_t storage_id() const;

  // Data movement and indexing.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor index_copy(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor& index_copy_(int64_t dim, const Tensor& index, const Tensor& source);
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                     bool accumulate = false);
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor& masked_fill_(const Tensor& mask, Scalar value);

  // In-place arithmetic operators.
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(Scalar o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(Scalar o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(Scalar o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(Scalar o) { return div_(o); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace lazyx
