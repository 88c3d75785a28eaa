#include <algorithm>
#include <atomic>

#include "ir/shape_infer.h"
#include "lazyx/error.h"
#include "runtime/env.h"
#include "tensor/tensor_impl.h"

namespace lazyx {

namespace {
// Storages and tensors share one id sequence: a base tensor's id is its storage's, so reports
// that name a storage name the tensor the user holds.
std::atomic<int64_t> next_tensor_id{1};
Storage* live_head = nullptr;
Storage* live_tail = nullptr;
int64_t live_n = 0;
}  // namespace

std::recursive_mutex& engine_mutex() {
  static std::recursive_mutex* mu = new std::recursive_mutex();  // outlives static teardown
  return *mu;
}

Storage::Storage(Shape shape, Dtype dtype)
    : id_(next_tensor_id.fetch_add(1, std::memory_order_relaxed)),
      shape_(std::move(shape)),
      dtype_(dtype) {
  EngineLock lock(engine_mutex());
  prev_ = live_tail;
  if (live_tail) {
    live_tail->next_ = this;
  } else {
    live_head = this;
  }
  live_tail = this;
  ++live_n;
}

Storage::~Storage() {
  EngineLock lock(engine_mutex());
  if (prev_) {
    prev_->next_ = next_;
  } else {
    live_head = next_;
  }
  if (next_) {
    next_->prev_ = prev_;
  } else {
    live_tail = prev_;
  }
  --live_n;
  if (data_) data_->remove_holder();
}

Storage* Storage::first_live() { return live_head; }

const Shape& Storage::strides() const {
  if (!has_strides_) {
    strides_ = ir::contiguous_strides(shape_);
    has_strides_ = true;
  }
  return strides_;
}
int64_t Storage::live_count() { return live_n; }

void Storage::check_not_donated(const char* op) const {
  if (donated_) {
    ir::fail(op, "tensor storage " + std::to_string(id_) + " " + ir::shape_str(shape_) + " " +
                     dtype_name(dtype_) + " was donated at step " +
                     std::to_string(donated_step_) +
                     " (set_buffer_donation) and can no longer be read. Clone it before donating "
                     "if you still need its value.");
  }
}

ir::NodePtr Storage::value(const char* op) {
  check_not_donated(op);
  if (pending_) return pending_;
  if (param_ && param_->buffer_version() == data_->version()) return param_;
  // Once no graph holds the node any more (the last step's graph is gone), it follows the
  // buffer's new version: a cached step then makes no node for each tensor it reads.
  if (param_ && param_.use_count() == 1) {
    param_->set_buffer_version(data_->version());
  } else {
    param_ = ir::Node::parameter(data_, shape_, dtype_);
  }
  return param_;
}

void Storage::set_pending(ir::NodePtr node) { pending_ = std::move(node); }

void Storage::set_data(runtime::BufferPtr buf) {
  if (data_ != buf) {
    if (data_) data_->remove_holder();
    if (buf) buf->add_holder();
    data_ = std::move(buf);
    param_ = nullptr;  // it holds the old buffer
  }
  pending_ = nullptr;
  donate_flag_ = false;  // the flag does not pass to outputs (rule 3)
}

void Storage::mark_donated(int64_t step) {
  if (data_) data_->remove_holder();
  data_ = nullptr;
  pending_ = nullptr;
  param_ = nullptr;
  donate_flag_ = false;
  donated_ = true;
  donated_step_ = step;
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage)
    : id_(storage->id()),
      storage_(std::move(storage)),
      is_view_(false) {}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides,
                       int64_t offset)
    : id_(next_tensor_id.fetch_add(1, std::memory_order_relaxed)),
      storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset),
      is_view_(true) {
  identity_ = offset_ == 0 && sizes_ == storage_->shape() &&
              strides_ == ir::contiguous_strides(sizes_);
}

bool TensorImpl::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = sizes().size(); i-- > 0;) {
    if (sizes()[i] == 1) continue;
    if (strides()[i] != expect) return false;
    expect *= sizes()[i];
  }
  return true;
}

ir::NodePtr TensorImpl::value(const char* op) const {
  ir::NodePtr v = storage_->value(op);
  if (identity_) return v;
  ir::Attrs a;
  a.ints = strides();
  a.i0 = offset_;
  // A window into a materialized buffer reads from a parameter that starts at the window, so
  // the offset is a run-time operand (LAZYX_STATIC_VIEW_OFFSETS=1 bakes it into the graph).
  if (v->op() == ir::Op::Parameter && !env::flag("LAZYX_STATIC_VIEW_OFFSETS", false)) {
    v = ir::Node::window(v->buffer(), v->shape(), v->dtype(), offset_);
    a.i0 = 0;
  }
  return ir::make_node(ir::Op::AsStrided, dtype(), sizes(), {std::move(v)}, std::move(a));
}

void TensorImpl::assign(const char* op, ir::NodePtr v) {
  if (v->shape() != sizes()) {
    ir::fail(op, "in-place op would change the tensor's shape from " + ir::shape_str(sizes()) +
                     " to " + ir::shape_str(v->shape()) +
                     ". Use the out-of-place op and assign the result instead.");
  }
  if (v->dtype() != dtype()) {
    ir::fail(op, std::string("internal: in-place result dtype ") + dtype_name(v->dtype()) +
                     " does not match " + dtype_name(dtype()) + ".");
  }
  storage_->check_not_donated(op);
  if (identity_) {
    storage_->set_pending(std::move(v));
    return;
  }
  // Writing through a view whose elements share memory would depend on the write order.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (size_t i = 0; i < sizes().size(); ++i) {
    if (sizes()[i] > 1) dims.emplace_back(strides()[i], sizes()[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t extent = 0;  // elements spanned by the smaller-stride dims
  for (auto [st, sz] : dims) {
    if (st <= extent) {
      ir::fail(op, "cannot write in place into the view " + ir::shape_str(sizes()) +
                       " with strides " + ir::shape_str(strides()) +
                       ": several elements share one memory location (an expanded view or "
                       "overlapping windows). Call clone() first.");
    }
    extent += (sz - 1) * st;
  }
  ir::Attrs a;
  a.ints = strides();
  a.i0 = offset_;
  ir::NodePtr base = storage_->value(op);
  storage_->set_pending(ir::make_node(ir::Op::AsStridedScatter, dtype(), storage_->shape(),
                                      {std::move(base), std::move(v)}, std::move(a)));
}

Tensor make_tensor(ir::NodePtr value) {
  EngineLock lock(engine_mutex());
  auto st = std::make_shared<Storage>(value->shape(), value->dtype());
  st->set_pending(std::move(value));
  return Tensor(std::make_shared<TensorImpl>(std::move(st)));
}

Tensor make_tensor(runtime::BufferPtr buf, Shape shape, Dtype dtype) {
  EngineLock lock(engine_mutex());
  auto st = std::make_shared<Storage>(std::move(shape), dtype);
  st->set_data(std::move(buf));
  return Tensor(std::make_shared<TensorImpl>(std::move(st)));
}

const TensorImpl& impl_of(const char* op, const Tensor& t) {
  if (!t.defined()) ir::fail(op, "called on an undefined tensor (a default-constructed handle).");
  return *t.impl();
}

}  // namespace lazyx
