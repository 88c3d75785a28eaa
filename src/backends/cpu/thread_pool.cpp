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

namespace lazyx::cpu {

int default_num_threads() {
  const char* env = std::getenv("LAZYX_NUM_THREADS");
  if (env && *env) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

struct ThreadPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::mutex run_mu;  // one parallel_for at a time; nested calls run inline
  uint64_t generation = 0;
  bool stop = false;
  // The current job.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::atomic<int> pending{0};
  std::exception_ptr error;
  std::mutex error_mu;
  std::vector<std::thread> workers;
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
    s_->workers.emplace_back([this, w] {
      State& s = *s_;
      uint64_t seen = 0;
      for (;;) {
        const std::function<void(int64_t, int64_t)>* fn;
        std::pair<int64_t, int64_t> chunk;
        {
          std::unique_lock<std::mutex> lock(s.mu);
          s.cv.wait(lock, [&] { return s.stop || s.generation != seen; });
          if (s.stop) return;
          seen = s.generation;
          fn = s.fn;
          chunk = static_cast<size_t>(w) < s.chunks.size() ? s.chunks[w] : std::make_pair<int64_t, int64_t>(0, 0);
        }
        if (chunk.second > chunk.first) {
          in_pool_job = true;
          try {
            (*fn)(chunk.first, chunk.second);
          } catch (...) {
            std::lock_guard<std::mutex> g(s.error_mu);
            if (!s.error) s.error = std::current_exception();
          }
          in_pool_job = false;
        }
        s.pending.fetch_sub(1, std::memory_order_acq_rel);
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
  std::vector<std::pair<int64_t, int64_t>> chunks(num_threads_, {0, 0});
  for (int p = 0; p < parts; ++p) {
    int64_t b = blocks * p / parts * grain, e = std::min(n, blocks * (p + 1) / parts * grain);
    chunks[p] = {b, e};
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.fn = &fn;
    s.chunks = chunks;
    s.error = nullptr;
    s.pending.store(num_threads_ - 1, std::memory_order_release);
    s.generation++;
  }
  s.cv.notify_all();
  std::exception_ptr mine;
  in_pool_job = true;
  try {
    fn(chunks[0].first, chunks[0].second);
  } catch (...) {
    mine = std::current_exception();
  }
  in_pool_job = false;
  while (s.pending.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (mine) std::rethrow_exception(mine);
  if (s.error) std::rethrow_exception(s.error);
}

}  // namespace lazyx::cpu
