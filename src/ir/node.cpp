#include "ir/node.h"

#include <atomic>
#include <iterator>
#include <vector>

#include "runtime/buffer.h"

namespace lazyx::ir {

namespace {
std::atomic<int64_t> next_node_id{1};
}

uint64_t hash_combine(uint64_t seed, uint64_t v) {
  // splitmix64 finalizer over the pair: cheap and well mixed.
  uint64_t x = seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

Node::Node(Op op, Dtype dtype, Shape shape, std::vector<NodePtr> operands, Attrs attrs)
    : op_(op),
      dtype_(dtype),
      shape_(std::move(shape)),
      attrs_(std::move(attrs)),
      operands_(std::move(operands)),
      id_(next_node_id.fetch_add(1, std::memory_order_relaxed)) {
  // Structure, shapes, dtypes and attributes; never buffer identity or scalar values.
  uint64_t h = hash_combine(static_cast<uint64_t>(op_) + 1, static_cast<uint64_t>(dtype_));
  h = hash_combine(h, shape_.size());
  for (int64_t d : shape_) h = hash_combine(h, static_cast<uint64_t>(d));
  h = hash_combine(h, attrs_.ints.size());
  for (int64_t v : attrs_.ints) h = hash_combine(h, static_cast<uint64_t>(v));
  h = hash_combine(h, static_cast<uint64_t>(attrs_.i0));
  h = hash_combine(h, attrs_.flag);
  for (const NodePtr& o : operands_) h = hash_combine(h, o->hash_);
  hash_ = h;
}

namespace {
// The operands awaiting release on this thread while the outermost ~Node drains them. A raw
// pointer to that frame's vector, so nothing thread-local needs destruction.
thread_local std::vector<NodePtr>* release_stack = nullptr;
}  // namespace

Node::~Node() {
  if (operands_.empty()) return;
  if (release_stack) {  // an outer ~Node is draining: hand the operands to it
    for (NodePtr& o : operands_) release_stack->push_back(std::move(o));
    return;
  }
  std::vector<NodePtr> stack(std::make_move_iterator(operands_.begin()),
                             std::make_move_iterator(operands_.end()));
  release_stack = &stack;
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    n.reset();  // if this was the last reference, its operands land on `stack`
  }
  release_stack = nullptr;
}

int64_t Node::numel() const { return shape_numel(shape_); }

NodePtr Node::window(std::shared_ptr<runtime::Buffer> buffer, Shape shape, Dtype dtype,
                     int64_t offset) {
  NodePtr n = parameter(std::move(buffer), std::move(shape), dtype);
  n->param_offset_ = offset;
  n->window_ = true;
  return n;
}

NodePtr Node::parameter(std::shared_ptr<runtime::Buffer> buffer, Shape shape, Dtype dtype) {
  auto n = std::make_shared<Node>(Op::Parameter, dtype, std::move(shape), std::vector<NodePtr>{});
  n->buffer_version_ = buffer->version();
  n->buffer_ = std::move(buffer);
  return n;
}

NodePtr Node::scalar(Dtype dtype, double f, int64_t i) {
  auto n = std::make_shared<Node>(Op::Scalar, dtype, Shape{}, std::vector<NodePtr>{});
  n->scalar_f_ = f;
  n->scalar_i_ = i;
  return n;
}

NodePtr make_node(Op op, Dtype dtype, Shape shape, std::vector<NodePtr> operands, Attrs attrs) {
  return std::make_shared<Node>(op, dtype, std::move(shape), std::move(operands),
                                std::move(attrs));
}

}  // namespace lazyx::ir
