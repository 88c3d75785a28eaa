// A persistent thread pool for the CPU backend. Its size comes from LAZYX_NUM_THREADS (default:
// all cores). parallel_for splits a range into one contiguous chunk per thread; the caller claims
// chunks too, so workers that wake late never make it wait, and small ranges run inline.
#pragma once

#include <cstdint>
#include <functional>

namespace lazyx::cpu {

class ThreadPool {
 public:
  // The process-wide pool.
  static ThreadPool& get();
  int size() const { return num_threads_; }
  // Calls fn(begin, end) over [0, n) split into at most size() chunks whose boundaries are
  // multiples of `grain`. Ranges smaller than `min_parallel` run inline on the caller.
  // Exceptions from chunks are rethrown on the caller.
  void parallel_for(int64_t n, int64_t grain, int64_t min_parallel,
                    const std::function<void(int64_t, int64_t)>& fn);
  ~ThreadPool();

 private:
  explicit ThreadPool(int n);
  struct State;
  State* s_;
  int num_threads_;
};

int default_num_threads();

}  // namespace lazyx::cpu
