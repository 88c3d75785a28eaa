#include "backends/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/core_budget.h"
#include "backends/cpu/load_monitor.h"
#include "runtime/env.h"

namespace lazyx::cpu {

namespace {

// How long an idle worker polls for the next job before sleeping (the steps of one program
// follow each other within microseconds), and how long the caller polls for the last chunks.
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr auto kCallerSpin = std::chrono::microseconds(20);
constexpr int64_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready` for at most `budget`; true as soon as it holds.
template <class F>
bool spin_until(F ready, std::chrono::microseconds budget) {
  const auto end = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= end) return ready();
  }
}

thread_local bool in_pool_job = false;

}  // namespace

int default_num_threads() {
  if (int64_t n = env::integer("LAZYX_NUM_THREADS", 0, 1, 1024)) return static_cast<int>(n);
  return core_budget();
}

struct ThreadPool::State {
  std::mutex mu;
  std::condition_variable cv;
  int sleepers = 0;   // workers blocked on cv (guarded by mu)
  std::mutex run_mu;  // one parallel_for at a time; nested calls run inline
  uint64_t generation = 0;
  std::atomic<bool> stop{false};
  // The current job. Chunks are claimed one at a time, so a worker that wakes late (on a busy
  // machine) finds them already done by the caller instead of making it wait.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::atomic<uint32_t> nchunks{0};
  std::atomic<uint64_t> claim{0};  // (generation << 32) | next chunk
  std::atomic<uint32_t> done{0};
  std::exception_ptr error;
  std::mutex error_mu;
  std::vector<std::thread> workers;
  std::atomic<int> active{0};  // workers 1..active join the job (published with its claim word)
  LoadMonitor monitor;
  std::atomic<int> cap;  // lazyx::set_num_threads

  explicit State(int n) : monitor(n), cap(n) {}

  uint32_t published() const {
    return static_cast<uint32_t>(claim.load(std::memory_order_acquire) >> 32);
  }

  bool try_claim(uint32_t gen, uint32_t& idx) {
    uint64_t c = claim.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(c >> 32) != gen) return false;
      uint32_t i = static_cast<uint32_t>(c);
      if (i >= nchunks.load(std::memory_order_acquire)) return false;
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
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 ==
          nchunks.load(std::memory_order_relaxed)) {
        done.notify_one();
      }
    }
  }

  void worker_loop(int index) {
    pthread_setname_np(pthread_self(), "lazyx-pool");
    uint32_t seen = published();
    in_pool_job = true;
    for (;;) {
      auto fresh = [&] { return stop.load(std::memory_order_acquire) || published() != seen; };
      if (!spin_until(fresh, kWorkerSpin)) {
        std::unique_lock<std::mutex> lock(mu);
        ++sleepers;
        cv.wait(lock, fresh);
        --sleepers;
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = published();
      if (index <= active.load(std::memory_order_relaxed)) run_claimed(seen);
    }
  }
};

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = new ThreadPool(default_num_threads());  // never destroyed
  return *pool;
}

ThreadPool::ThreadPool(int n) : s_(new State(n < 1 ? 1 : n)), num_threads_(n < 1 ? 1 : n) {
  for (int w = 1; w < num_threads_; ++w) {
    s_->workers.emplace_back([this, w] { s_->worker_loop(w); });
  }
}

void ThreadPool::set_adaptive(bool on) { s_->monitor.set_enabled(on); }
void ThreadPool::set_width_cap(int n) { s_->cap.store(std::clamp(n, 1, num_threads_)); }
int ThreadPool::width_cap() const { return s_->cap.load(); }

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop.store(true, std::memory_order_release);
  }
  s_->cv.notify_all();
  for (auto& t : s_->workers) t.join();
  delete s_;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, int64_t min_parallel,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t blocks = (n + grain - 1) / grain;
  const int64_t per_thread =
      n >= kChunksPerThread * std::max<int64_t>(min_parallel, 1) ? kChunksPerThread : 1;
  const int parts = static_cast<int>(std::min<int64_t>(blocks, num_threads_ * per_thread));
  if (num_threads_ <= 1 || parts <= 1 || n < min_parallel || in_pool_job) {
    fn(0, n);
    return;
  }
  State& s = *s_;
  std::unique_lock<std::mutex> run(s.run_mu, std::try_to_lock);
  if (!run.owns_lock()) {  // another thread is using the pool: do not wait for it
    fn(0, n);
    return;
  }
  // Fewer threads while other processes use the cores, or as the user capped them.
  const int width = std::min(s.monitor.width(), s.cap.load(std::memory_order_relaxed));
  if (width <= 1) {
    fn(0, n);
    return;
  }
  uint32_t gen;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    // Close the previous job first: a worker that read its claim word before this store fails
    // its compare-exchange, so it cannot take a chunk of the old job counted against the new
    // one's bounds (which would run a half-written range and over-count `done`).
    s.claim.store((s.generation << 32) | 0xffffffffu, std::memory_order_release);
    s.fn = &fn;
    s.chunks.assign(parts, {0, 0});
    for (int p = 0; p < parts; ++p) {
      s.chunks[p] = {blocks * p / parts * grain, std::min(n, blocks * (p + 1) / parts * grain)};
    }
    s.nchunks.store(static_cast<uint32_t>(parts), std::memory_order_release);
    s.error = nullptr;
    s.done.store(0, std::memory_order_relaxed);
    s.active.store(width - 1, std::memory_order_relaxed);
    s.generation++;
    gen = static_cast<uint32_t>(s.generation);
    s.claim.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
    wake = s.sleepers > 0;
  }
  if (wake) s.cv.notify_all();
  in_pool_job = true;
  s.run_claimed(gen);
  in_pool_job = false;
  // Only chunks a worker already started remain: poll briefly, then sleep until the last ends.
  const uint32_t total = static_cast<uint32_t>(parts);
  auto finished = [&] { return s.done.load(std::memory_order_acquire) == total; };
  if (!spin_until(finished, kCallerSpin)) {
    for (uint32_t d; (d = s.done.load(std::memory_order_acquire)) != total;) {
      s.done.wait(d, std::memory_order_acquire);
    }
  }
  if (s.error) std::rethrow_exception(s.error);
}

}  // namespace lazyx::cpu
