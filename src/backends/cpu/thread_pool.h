// A persistent thread pool for the CPU backend, the only thread runtime of its parallel work
// (GEMM libraries are called single-threaded from its threads). Its size comes from
// LAZYX_NUM_THREADS (default: the cores the process may use). parallel_for splits a range into
// chunks that threads claim one at a time: the caller claims chunks too, so a worker that wakes
// late (or is descheduled on a busy machine) never holds it up for more than one chunk, and small
// ranges run inline. Idle workers spin for a few microseconds, then sleep; nothing busy-waits for
// long.
#pragma once

#include <cstdint>
#include <functional>

namespace lazyx::cpu {

class ThreadPool {
 public:
  // The process-wide pool; raises lazyx::Error when LAZYX_NUM_THREADS is invalid.
  static ThreadPool& get();
  int size() const { return num_threads_; }
  // Calls fn(begin, end) over [0, n) split into chunks whose boundaries are multiples of
  // `grain`: size() chunks, or up to 4 per thread when the range holds at least 4 * min_parallel
  // (so a stalled thread delays a small share). Ranges smaller than `min_parallel` run inline on
  // the caller, as do calls from inside a chunk. Exceptions from chunks are rethrown on the caller.
  void parallel_for(int64_t n, int64_t grain, int64_t min_parallel,
                    const std::function<void(int64_t, int64_t)>& fn);
  // Whether to run fewer threads while other processes busy the cores (load_monitor.h).
  void set_adaptive(bool on);
  // Runs at most n threads at once (lazyx::set_num_threads); chunks stay as size() makes them.
  void set_width_cap(int n);
  int width_cap() const;
  ~ThreadPool();

 private:
  explicit ThreadPool(int n);
  struct State;
  State* s_;
  int num_threads_;
};

// LAZYX_NUM_THREADS, else the cores this process may use (core_budget.h: its affinity mask and
// cgroup CPU quota); raises lazyx::Error when the variable is not a positive integer.
int default_num_threads();

}  // namespace lazyx::cpu
