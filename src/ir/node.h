// IR nodes: op, operands, attributes, output shape and dtype, and a structural hash.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "ir/op.h"
#include "lazyx/dtype.h"
#include "lazyx/tensor.h"

namespace lazyx::runtime {
class Buffer;
}

namespace lazyx::ir {

struct Attrs {
  std::vector<int64_t> ints;  // dims, strides
  int64_t i0 = 0;             // dim, offset
  bool flag = false;          // keepdim, accumulate
  bool operator==(const Attrs& o) const {
    return ints == o.ints && i0 == o.i0 && flag == o.flag;
  }
};

class Node;
using NodePtr = std::shared_ptr<Node>;

// A node's operands: up to three in place (almost every op), more in a heap array.
class Operands {
 public:
  Operands() = default;
  Operands(std::initializer_list<NodePtr> l);
  Operands(std::vector<NodePtr>&& v);  // NOLINT: implicit, callers pass vectors
  Operands(const std::vector<NodePtr>& v);  // NOLINT
  Operands(Operands&& o) noexcept : n_(o.n_), heap_(std::move(o.heap_)) {
    for (uint32_t i = 0; i < o.n_ && i < kInline; ++i) inline_[i] = std::move(o.inline_[i]);
    o.n_ = 0;
  }
  Operands& operator=(Operands&&) = delete;
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() = default;

  // Room for `n` operands, all empty; fill them through at().
  void resize(size_t n);
  NodePtr& at(size_t i) { return data()[i]; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const NodePtr* begin() const { return data(); }
  const NodePtr* end() const { return data() + n_; }
  const NodePtr& operator[](size_t i) const { return data()[i]; }
  NodePtr* data() { return heap_ ? heap_.get() : inline_; }
  const NodePtr* data() const { return heap_ ? heap_.get() : inline_; }

 private:
  static constexpr size_t kInline = 3;
  uint32_t n_ = 0;
  NodePtr inline_[kInline];
  std::unique_ptr<NodePtr[]> heap_;
};

class Node {
 public:
  Node(Op op, Dtype dtype, Shape shape, Operands&& operands, Attrs attrs = {});
  // Releases operands iteratively, so dropping a chain of any length uses constant stack.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Op op() const { return op_; }
  Dtype dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Attrs& attrs() const { return attrs_; }
  const Operands& operands() const { return operands_; }
  const NodePtr& operand(size_t i) const { return operands_[i]; }
  uint64_t hash() const { return hash_; }
  int64_t id() const { return id_; }
  int64_t numel() const;

  // Parameter payload: the buffer and its version when this node was made. A version change
  // means someone wrote the buffer while this graph still read it: a donation bug.
  const std::shared_ptr<runtime::Buffer>& buffer() const { return buffer_; }
  uint64_t buffer_version() const { return buffer_version_; }
  // For a parameter node nothing but its storage holds: follows the buffer's new version, so
  // the storage reuses the node across steps instead of making a new one.
  void set_buffer_version(uint64_t v) { buffer_version_ = v; }
  // A window's parameter starts this many elements into its buffer. The offset is a run-time
  // operand (passed with the buffer, not in the hash), so windows at other offsets share programs.
  bool is_window() const { return window_; }
  int64_t param_offset() const { return param_offset_; }
  // Scalar payload.
  double scalar_f() const { return scalar_f_; }
  int64_t scalar_i() const { return scalar_i_; }

  // Scratch for graph walks (under the engine lock): the walk's epoch and the node's index.
  mutable uint64_t walk_epoch = 0;
  mutable int32_t walk_index = -1;

  static NodePtr parameter(std::shared_ptr<runtime::Buffer> buffer, Shape shape, Dtype dtype);
  static NodePtr window(std::shared_ptr<runtime::Buffer> buffer, Shape shape, Dtype dtype,
                        int64_t offset);
  static NodePtr scalar(Dtype dtype, double f, int64_t i);

 private:
  // What a graph walk reads first (after the walk fields above), so it shares their cache line.
  Op op_;
  Dtype dtype_;
  uint64_t hash_ = 0;
  Operands operands_;
  Shape shape_;
  Attrs attrs_;
  int64_t id_ = 0;
  std::shared_ptr<runtime::Buffer> buffer_;
  uint64_t buffer_version_ = 0;
  int64_t param_offset_ = 0;
  bool window_ = false;
  double scalar_f_ = 0;
  int64_t scalar_i_ = 0;
};

NodePtr make_node(Op op, Dtype dtype, Shape shape, Operands operands, Attrs attrs = {});

// splitmix64's finalizer over the pair: cheap and well mixed. Inline: a walk calls it per node.
inline uint64_t hash_combine(uint64_t seed, uint64_t v) {
  uint64_t x = seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

}  // namespace lazyx::ir
