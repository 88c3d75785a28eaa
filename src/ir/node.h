// IR nodes: op, operands, attributes, output shape and dtype, and a structural hash.
#pragma once

#include <cstdint>
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

class Node {
 public:
  Node(Op op, Dtype dtype, Shape shape, std::vector<NodePtr> operands, Attrs attrs = {});
  // Releases operands iteratively, so dropping a chain of any length uses constant stack.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Op op() const { return op_; }
  Dtype dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Attrs& attrs() const { return attrs_; }
  const std::vector<NodePtr>& operands() const { return operands_; }
  const NodePtr& operand(size_t i) const { return operands_[i]; }
  uint64_t hash() const { return hash_; }
  int64_t id() const { return id_; }
  int64_t numel() const;

  // Parameter payload: the buffer and its version when this node was made. A version change
  // means someone wrote the buffer while this graph still read it: a donation bug.
  const std::shared_ptr<runtime::Buffer>& buffer() const { return buffer_; }
  uint64_t buffer_version() const { return buffer_version_; }
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
  Op op_;
  Dtype dtype_;
  Shape shape_;
  Attrs attrs_;
  std::vector<NodePtr> operands_;
  uint64_t hash_ = 0;
  int64_t id_ = 0;
  std::shared_ptr<runtime::Buffer> buffer_;
  uint64_t buffer_version_ = 0;
  int64_t param_offset_ = 0;
  bool window_ = false;
  double scalar_f_ = 0;
  int64_t scalar_i_ = 0;
};

NodePtr make_node(Op op, Dtype dtype, Shape shape, std::vector<NodePtr> operands,
                  Attrs attrs = {});

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
