// The eager oracle of lazyx-fuzz: a plain interpretation of the fuzzed programs. Every op runs at
// once on std::vector<double> values; views are explicit strided windows over a shared storage.
// There is no laziness and no donation in the values. Beside the values, each storage carries a
// small *model* of what ALIASING.md says the engine must know about it (pending or not, the
// buffer it holds or its alias source, the buffers its pending value reads), from which the
// fuzzer derives where donation must happen. The model never influences the values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lazyx/dtype.h"
#include "lazyx/tensor.h"

namespace lazyx::fuzz {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
Shape contiguous_strides_of(const Shape& s);
std::string shape_cpp(const Shape& s);  // "{2, 3}"
double round_to(double v, Dtype d);
std::optional<Shape> broadcast(const Shape& a, const Shape& b);
// PyTorch's computeStride: strides to view (sizes, strides) as `ns`, if possible.
std::optional<Shape> view_strides(const Shape& os, const Shape& ost, const Shape& ns);
// torch.result_type for two floating tensors (0-d tensors do not promote dimensioned ones).
Dtype result_dtype(Dtype a, bool a0d, Dtype b, bool b0d);

// A dense row-major value.
struct Dense {
  Shape shape;
  Dtype dtype = kFloat32;
  std::vector<double> v;
  double max_abs() const;
  bool bounded(double limit) const;  // finite and |v| <= limit everywhere
};

// What a pending value is, as far as donation is concerned (the model).
struct Expr {
  int64_t node = 0;      // identity of the pending node (0: a bare parameter)
  int64_t pass_buf = 0;  // the node is a bare parameter of this buffer (a pass-through)
  std::set<int64_t> deps;  // buffers the node reads, and (negated) the pending nodes it contains
};

struct OStorage {
  int64_t uid = 0;
  Shape shape;
  Dtype dtype = kFloat32;
  std::vector<double> data;
  bool donated = false;  // given away by a user-requested donation: reads raise
  bool flagged = false;  // set_buffer_donation(t, true) in force
  // The model.
  bool pending = false;
  int64_t buf = 0;  // buffer held (materialized) or alias source (pending); 0: none
  Expr expr;        // when pending
};

struct OTensor {
  std::shared_ptr<OStorage> st;
  Shape sizes, strides;
  int64_t offset = 0;
  bool is_view = false;

  bool identity() const;     // covers the whole storage in its natural layout
  bool contiguous() const;   // as TensorImpl::is_contiguous
  bool expanded() const;     // some stride is 0 over a size > 1: no in-place writes
  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
};

class Oracle {
 public:
  // Creation.
  OTensor materialized(const Dense& d);  // tensor<T>(values): a fresh buffer
  // clone() of a materialized base: a new storage holding the same buffer (copy-on-write).
  OTensor materialized_sharing(const Dense& d, int64_t buf);
  OTensor pinned_scalar(double v);       // scalar_tensor: a buffer owned by the constant cache
  OTensor pending_new(const Dense& d, Expr e);
  Expr fresh_expr(std::set<int64_t> deps) { return Expr{++next_node_, 0, std::move(deps)}; }

  // Values.
  Dense read(const OTensor& t) const;
  // In-place update of t's window with `d` (t's shape), rounded to t's dtype; `v` is the new
  // value's expression, as TensorImpl::assign records it.
  void assign(const OTensor& t, const Dense& d, const Expr& v);

  // The model of a tensor's current value, as TensorImpl::value builds it.
  Expr value_expr(const OTensor& t);
  static std::set<int64_t> deps_union(const std::vector<Expr>& es);

  // Views (metadata only, no check of donation, as in the engine).
  OTensor view(const OTensor& t, Shape sizes, Shape strides, int64_t offset) const;

  // Syncs: the targets' values are materialized (model only).
  void sync(const std::vector<OStorage*>& targets);
  // A partial sync's targets plus every live pending storage whose node their graphs contain
  // (not a bare parameter): the engine keeps what it computes (ALIASING.md, live values).
  std::vector<OStorage*> with_kept_live(const std::vector<OStorage*>& targets) const;
  void mark_donated(OStorage* s);

  // Live storages, in creation order.
  std::vector<std::shared_ptr<OStorage>> live() const;
  std::vector<OStorage*> holders(int64_t buf) const;
  bool is_pinned(int64_t buf) const { return pinned_bufs_.count(buf) != 0; }

 private:
  std::shared_ptr<OStorage> new_storage(const Shape& shape, Dtype dtype);
  int64_t next_uid_ = 0, next_buf_ = 0, next_node_ = 0;
  std::vector<std::weak_ptr<OStorage>> registry_;
  std::vector<std::pair<uint64_t, int64_t>> pinned_by_value_;
  std::set<int64_t> pinned_bufs_;
};

// Numerics.
Dense broadcast_to(const Dense& a, const Shape& s);
Dense map1(const Dense& a, double (*f)(double), std::optional<Dtype> out = std::nullopt);
Dense reduce(const Dense& a, int kind, const std::vector<int64_t>& dims, bool keepdim);
Dense softmax(const Dense& a, int64_t dim);
Dense matmul(const Dense& a, const Dense& b);
Dense index_select(const Dense& a, int64_t dim, const std::vector<int64_t>& idx);
Dense round_dense(Dense d);

}  // namespace lazyx::fuzz
