#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/env.h"

namespace lazyx::cpu {

int default_num_threads() {
  if (int64_t n = env::integer("LAZYX_NUM_THREADS", 0, 1, 1024)) return static_cast<int>(n);
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

struct ThreadPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::mutex run_mu;  // one parallel_for at a time; nested calls run inline
  uint64_t generation = 0;
  bool stop = false;
  // The current job. Chunks are claimed one at a time, so a worker that wakes late (on a busy
  // machine) finds them already done by the caller instead of making it wait.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  uint32_t nchunks = 0;
  std::atomic<uint64_t> claim{0};  // (generation << 32) | next chunk
  std::atomic<uint32_t> done{0};
  std::exception_ptr error;
  std::mutex error_mu;
  std::vector<std::thread> workers;

  bool try_claim(uint32_t gen, uint32_t& idx) {
    uint64_t c = claim.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(c >> 32) != gen) return false;
      uint32_t i = static_cast<uint32_t>(c);
      if (i >= nchunks) return false;
      if (claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
        idx = i;
        return true;
      }
    }
  }

  void run_claimed(uint32_t gen) {
    uint32_t idx;
    while (try_claim(gen, idx)) {
      try {
        (*fn)(chunks[idx].first, chunks[idx].second);
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mu);
        if (!error) error = std::current_exception();
      }
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
};

namespace {
thread_local bool in_pool_job = false;
}

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = new ThreadPool(default_num_threads());  // never destroyed
  return *pool;
}

ThreadPool::ThreadPool(int n) : s_(new State), num_threads_(n < 1 ? 1 : n) {
  for (int w = 1; w < num_threads_; ++w) {
    s_->workers.emplace_back([this] {
      State& s = *s_;
      uint64_t seen = 0;
      in_pool_job = true;
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(s.mu);
          s.cv.wait(lock, [&] { return s.stop || s.generation != seen; });
          if (s.stop) return;
          seen = s.generation;
        }
        s.run_claimed(static_cast<uint32_t>(seen));
      }
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
  }
  s_->cv.notify_all();
  for (auto& t : s_->workers) t.join();
  delete s_;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, int64_t min_parallel,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t blocks = (n + grain - 1) / grain;
  int parts = static_cast<int>(std::min<int64_t>(blocks, num_threads_));
  if (parts <= 1 || n < min_parallel || in_pool_job) {
    fn(0, n);
    return;
  }
  State& s = *s_;
  std::unique_lock<std::mutex> run(s.run_mu, std::try_to_lock);
  if (!run.owns_lock()) {  // another thread is using the pool: do not wait for it
    fn(0, n);
    return;
  }
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.fn = &fn;
    s.chunks.assign(parts, {0, 0});
    for (int p = 0; p < parts; ++p) {
      s.chunks[p] = {blocks * p / parts * grain, std::min(n, blocks * (p + 1) / parts * grain)};
    }
    s.nchunks = static_cast<uint32_t>(parts);
    s.error = nullptr;
    s.done.store(0, std::memory_order_relaxed);
    s.generation++;
    gen = static_cast<uint32_t>(s.generation);
    s.claim.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  }
  s.cv.notify_all();
  in_pool_job = true;
  s.run_claimed(gen);
  in_pool_job = false;
  // Only chunks a worker already started remain; wait for those.
  while (s.done.load(std::memory_order_acquire) != s.nchunks) std::this_thread::yield();
  if (s.error) std::rethrow_exception(s.error);
}

}  // namespace lazyx::cpu
