// Per-thread reuse of a scratch object: a lease takes one from this thread's free list (or makes
// one) and gives it back, cleared, when it ends, so lists filled every step keep their capacity.
// A nested lease on the same thread gets an object of its own.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace lazyx::runtime {

// T has clear(): empties its lists and keeps their capacity.
template <class T>
class ScratchLease {
 public:
  ScratchLease() {
    auto& l = free_list();
    if (l.empty()) {
      s_ = std::make_unique<T>();
    } else {
      s_ = std::move(l.back());
      l.pop_back();
    }
  }
  ~ScratchLease() {
    s_->clear();
    free_list().push_back(std::move(s_));
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  T& operator*() { return *s_; }
  T* operator->() { return s_.get(); }

 private:
  // Called once per use: each call asks the dynamic linker for the thread-local's address.
  [[gnu::noinline]] static std::vector<std::unique_ptr<T>>& free_list() {
    thread_local std::vector<std::unique_ptr<T>> l;
    return l;
  }
  std::unique_ptr<T> s_;
};

}  // namespace lazyx::runtime
