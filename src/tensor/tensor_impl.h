// User tensors: a Storage holds a value (a buffer, or a pending IR node) and the alias source;
// a TensorImpl is a strided window onto a storage. Views share the storage (rule 7).
#pragma once

#include <memory>
#include <mutex>

#include "ir/node.h"
#include "lazyx/tensor.h"
#include "runtime/buffer.h"

namespace lazyx {

// One engine-wide lock: tracing, syncs and handle drops are serialized (see README, Threads).
std::recursive_mutex& engine_mutex();
using EngineLock = std::lock_guard<std::recursive_mutex>;

class Storage {
 public:
  Storage(Shape shape, Dtype dtype);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  int64_t id() const { return id_; }
  const Shape& shape() const { return shape_; }
  Dtype dtype() const { return dtype_; }
  const Shape& strides() const;  // contiguous, computed on first use
  int64_t numel() const { return ir::shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  bool pending() const { return pending_ != nullptr; }
  const ir::NodePtr& pending_node() const { return pending_; }
  // The buffer held as the value (when not pending), or as the alias source (when pending).
  const runtime::BufferPtr& data() const { return data_; }

  // The current value as an IR node. Raises if the buffer was donated.
  ir::NodePtr value(const char* op);
  // Replaces the whole value with a pending computation; the alias source is kept.
  void set_pending(ir::NodePtr node);
  // The value is now `buf` (a sync ran); the chain of pending updates starts over.
  void set_data(runtime::BufferPtr buf);
  // The buffer was given to another output (rule 3): reads now raise.
  void mark_donated(int64_t step);

  bool donate_flag() const { return donate_flag_; }
  void set_donate_flag(bool f) { donate_flag_ = f; }
  bool donated() const { return donated_; }
  void check_not_donated(const char* op) const;

  // Registry of live storages, in creation order (mark_step syncs them all).
  static Storage* first_live();
  Storage* next_live() const { return next_; }
  static int64_t live_count();

  // Scratch for the executor while a sync runs.
  int64_t sync_output_ = -1;

 private:
  int64_t id_;
  Shape shape_;
  mutable Shape strides_;
  mutable bool has_strides_ = false;
  Dtype dtype_;
  runtime::BufferPtr data_;
  ir::NodePtr pending_;
  ir::NodePtr param_;  // cached Parameter node over data_, so all readers share one node
  bool donate_flag_ = false;
  bool donated_ = false;
  int64_t donated_step_ = 0;
  Storage* prev_ = nullptr;
  Storage* next_ = nullptr;
};

class TensorImpl {
 public:
  // A base tensor over a fresh storage.
  explicit TensorImpl(std::shared_ptr<Storage> storage);
  // A view onto `storage`.
  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset);

  int64_t id() const { return id_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // A base tensor uses its storage's shape and strides, so tracing copies no shapes.
  const Shape& sizes() const { return is_view_ ? sizes_ : storage_->shape(); }
  const Shape& strides() const { return is_view_ ? strides_ : storage_->strides(); }
  int64_t offset() const { return offset_; }
  Dtype dtype() const { return storage_->dtype(); }
  bool is_view() const { return is_view_; }
  // Covers the whole storage in its natural layout, so its value is the storage's.
  bool is_identity() const { return identity_; }
  bool is_contiguous() const;

  // Calls f(k, off) for each element k in row-major order, at element offset `off` of the storage.
  template <typename F>
  void for_each_offset(F&& f) const {
    const Shape& sz = sizes();
    const Shape& st = strides();
    int64_t n = ir::shape_numel(sz);
    Shape idx(sz.size(), 0);
    int64_t off = offset_;
    for (int64_t k = 0; k < n; ++k) {
      f(k, off);
      for (size_t d = sz.size(); d-- > 0;) {
        off += st[d];
        if (++idx[d] < sz[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
  }

  // The value as an IR node: the storage's value, gathered through the view.
  ir::NodePtr value(const char* op) const;
  // In-place update: `v` (same shape) becomes this tensor's value; through a view, it is
  // scattered into the base. Validates everything before changing anything.
  void assign(const char* op, ir::NodePtr v);

 private:
  int64_t id_;
  std::shared_ptr<Storage> storage_;
  Shape sizes_, strides_;
  int64_t offset_ = 0;
  bool is_view_ = false;
  bool identity_ = true;
};

Tensor make_tensor(ir::NodePtr value);                 // a new base tensor, pending
Tensor make_tensor(runtime::BufferPtr buf, Shape shape, Dtype dtype);  // holding a buffer
const TensorImpl& impl_of(const char* op, const Tensor& t);  // raises on an undefined handle

}  // namespace lazyx
