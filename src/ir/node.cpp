#include "ir/node.h"

#include <atomic>
#include <iterator>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/buffer.h"

namespace lazyx::ir {

namespace {
std::atomic<int64_t> next_node_id{1};

// Recycles node blocks (a node and its shared_ptr count, allocated together). A step frees about
// as many nodes as it makes, often on another thread (the autograd thread traces the backward),
// and malloc's per-thread caches keep only a few blocks of a size. At most kKeep free blocks stay
// here (a few MiB); the rest go back to malloc. Address sanitizer builds do not pool, so a use
// after free still shows.
class NodePool {
 public:
  void* get(size_t bytes) {
    if (kPool && bytes == block_size()) {
      lock();
      if (Free* f = free_) {
        free_ = f->next;
        --count_;
        unlock();
        return f;
      }
      unlock();
    }
    return ::operator new(bytes);
  }
  void put(void* p, size_t bytes) {
    if (kPool && bytes == block_size()) {
      lock();
      if (count_ < kKeep) {
        auto* f = static_cast<Free*>(p);
        f->next = free_;
        free_ = f;
        ++count_;
        unlock();
        return;
      }
      unlock();
    }
    ::operator delete(p);
  }
  // The one block size pooled: the first size asked for (every node block has the same).
  size_t block_size() const { return block_.load(std::memory_order_relaxed); }
  void set_block_size(size_t bytes) {
    size_t zero = 0;
    if (block_size() == 0) block_.compare_exchange_strong(zero, bytes, std::memory_order_relaxed);
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kPool = false;
#else
  static constexpr bool kPool = true;
#endif
  static constexpr size_t kKeep = 16384;
  struct Free {
    Free* next;
  };
  // A spin lock (held for a few instructions); a holder descheduled on a busy machine is waited
  // for with yields, not with a full time slice of spinning.
  void lock() {
    for (int spins = 0; busy_.test_and_set(std::memory_order_acquire); ++spins) {
      if (spins >= 64) std::this_thread::yield();
    }
  }
  void unlock() { busy_.clear(std::memory_order_release); }

  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  std::atomic<size_t> block_{0};
  Free* free_ = nullptr;
  size_t count_ = 0;
};

NodePool& node_pool() {
  static NodePool* p = new NodePool();  // never destroyed: nodes may die during exit
  return *p;
}

// The allocator std::allocate_shared uses for nodes: it takes node blocks from the pool.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) {
    node_pool().set_block_size(sizeof(T));
    return static_cast<T*>(node_pool().get(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) { node_pool().put(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const PoolAllocator<U>&) const {
    return false;
  }
};

template <class... A>
NodePtr new_node(A&&... args) {
  return std::allocate_shared<Node>(PoolAllocator<Node>(), std::forward<A>(args)...);
}
}  // namespace

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

Operands::Operands(std::initializer_list<NodePtr> l) {
  resize(l.size());
  size_t i = 0;
  for (const NodePtr& n : l) at(i++) = n;
}

Operands::Operands(std::vector<NodePtr>&& v) {
  resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) at(i) = std::move(v[i]);
}

Operands::Operands(const std::vector<NodePtr>& v) {
  resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) at(i) = v[i];
}

void Operands::resize(size_t n) {
  if (n > kInline) {
    auto h = std::make_unique<NodePtr[]>(n);
    for (size_t i = 0; i < n_; ++i) h[i] = std::move(data()[i]);
    heap_ = std::move(h);
  }
  n_ = static_cast<uint32_t>(n);
}

Node::Node(Op op, Dtype dtype, Shape shape, Operands&& operands, Attrs attrs)
    : op_(op),
      dtype_(dtype),
      operands_(std::move(operands)),
      shape_(std::move(shape)),
      attrs_(std::move(attrs)),
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
    for (size_t i = 0; i < operands_.size(); ++i) {
      release_stack->push_back(std::move(operands_.at(i)));
    }
    return;
  }
  // Operands that others keep alive, or that have none of their own, release without recursion:
  // the common case, which then needs no stack.
  bool cascades = false;
  for (const NodePtr& o : operands_) cascades |= o && o.use_count() == 1 && !o->operands_.empty();
  if (!cascades) return;
  std::vector<NodePtr> stack(std::make_move_iterator(operands_.data()),
                             std::make_move_iterator(operands_.data() + operands_.size()));
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
  auto n = new_node(Op::Parameter, dtype, std::move(shape), Operands());
  n->buffer_version_ = buffer->version();
  n->buffer_ = std::move(buffer);
  return n;
}

NodePtr Node::scalar(Dtype dtype, double f, int64_t i) {
  auto n = new_node(Op::Scalar, dtype, Shape{}, Operands());
  n->scalar_f_ = f;
  n->scalar_i_ = i;
  return n;
}

NodePtr make_node(Op op, Dtype dtype, Shape shape, Operands operands, Attrs attrs) {
  return new_node(op, dtype, std::move(shape), std::move(operands), std::move(attrs));
}

}  // namespace lazyx::ir
