// Device buffers. Both backends keep data in host memory from the caching allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace lazyx::runtime {

class Buffer {
 public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  int64_t id() const { return id_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // Bumped on every write of new contents; IR parameters remember the version they read.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // Storages that hold this buffer as their value (or as their alias source). Donation needs
  // every holder to be rewritten by the same program (rule 1b).
  int holders() const { return holders_; }
  void add_holder() { ++holders_; }
  void remove_holder() { --holders_; }

  // Owned by the constant cache: never donated (rule 1c).
  bool pinned() const { return pinned_; }
  void set_pinned(bool p) { pinned_ = p; }

  // Scratch for graph walks (under the engine lock): the walk's epoch and this buffer's
  // parameter slot in it, so a sync finds a buffer's slot without a hash map.
  uint64_t walk_epoch = 0;
  int32_t walk_slot = -1;

 private:
  int64_t id_;
  void* data_;
  size_t bytes_;
  uint64_t version_ = 0;
  int holders_ = 0;
  bool pinned_ = false;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace lazyx::runtime
