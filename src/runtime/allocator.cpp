#include "runtime/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "lazyx/error.h"
#include "runtime/env.h"

namespace lazyx::runtime {

namespace {

constexpr size_t kSmall = 1 << 20;        // below: malloc'ed; above: mmap'ed with huge pages
constexpr size_t kPage = 4096;
constexpr size_t kMinBlock = 64;

struct Cached {
  void* p;
  int64_t freed_at;  // the step clock when the block entered the cache
};

constexpr size_t kPeakWindow = 4;  // steps whose peaks bound the cache

struct State {
  std::mutex mu;
  std::multimap<size_t, Cached> free_blocks;  // block size -> block
  MemoryStats stats;
  int64_t clock = 0;      // steps seen by trim_cache
  int64_t step_peak = 0;  // bytes in use at most since the last trim
  int64_t window[kPeakWindow] = {};
  int64_t fail_after = -1;  // fail_allocation_after: allocations left before failing
};

State& state() {
  static State* s = new State();  // never destroyed: buffers may outlive static teardown
  return *s;
}

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

void* fresh_block(size_t size) {
  if (size < kSmall) {
    void* p = std::aligned_alloc(64, size);
    if (!p) throw Error("[allocator] out of memory allocating " + std::to_string(size) + " bytes.");
    return p;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error("[allocator] out of memory mapping " + std::to_string(size) + " bytes.");
  }
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void release_block(void* p, size_t size) {
  if (size < kSmall) {
    std::free(p);
  } else {
    munmap(p, size);
  }
}

}  // namespace

size_t allocation_size(size_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  // Size classes of 1/8 of a power of two bound the waste to 12.5 % (a 1.1 MiB buffer takes
  // 1.25 MiB, not 2), and keep repeated sizes on one class so cached blocks are reused.
  size_t p = 1;
  while (p < bytes) p <<= 1;
  size_t step = p >= 1024 ? p / 8 : 64;
  size_t size = round_up(bytes, step);
  return size < kSmall ? size : round_up(size, kPage);
}

void* allocate(size_t bytes) {
  size_t size = allocation_size(bytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fail_after == 0) {
    throw Error("[allocator] out of memory allocating " + std::to_string(size) +
                " bytes (injected by fail_allocation_after).");
  }
  if (s.fail_after > 0) s.fail_after--;
  void* p = nullptr;
  auto it = s.free_blocks.find(size);
  if (it != s.free_blocks.end()) {
    p = it->second.p;
    s.free_blocks.erase(it);
    s.stats.bytes_cached -= static_cast<int64_t>(size);
  } else {
    p = fresh_block(size);
    s.stats.num_fresh_allocs++;
  }
  s.stats.num_allocs++;
  s.stats.bytes_in_use += static_cast<int64_t>(size);
  if (s.stats.bytes_in_use > s.stats.peak_bytes) s.stats.peak_bytes = s.stats.bytes_in_use;
  if (s.stats.bytes_in_use > s.step_peak) s.step_peak = s.stats.bytes_in_use;
  return p;
}

void fail_allocation_after(int64_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_after = n < 0 ? -1 : n;
}

void deallocate(void* p, size_t bytes) {
  if (!p) return;
  size_t size = allocation_size(bytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.stats.bytes_in_use -= static_cast<int64_t>(size);
  s.stats.bytes_cached += static_cast<int64_t>(size);
  s.free_blocks.emplace(size, Cached{p, s.clock});
}

MemoryStats allocator_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stats;
}

void allocator_reset_peak() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.stats.peak_bytes = s.stats.bytes_in_use;
}

void allocator_empty_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& [size, c] : s.free_blocks) release_block(c.p, size);
  s.free_blocks.clear();
  s.stats.bytes_cached = 0;
}

int64_t cache_limit_percent() { return env::integer("LAZYX_CACHE_LIMIT", 100, 0, 1000000); }

void trim_cache(int64_t limit_percent) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.window[s.clock % kPeakWindow] = s.step_peak;
  s.clock++;
  s.step_peak = s.stats.bytes_in_use;
  int64_t recent = 0;
  for (int64_t p : s.window) recent = std::max(recent, p);
  const int64_t bound = static_cast<int64_t>(static_cast<double>(recent) * limit_percent / 100.0);
  int64_t excess = s.stats.bytes_in_use + s.stats.bytes_cached - bound;
  if (excess <= 0 || s.free_blocks.empty()) return;
  // Least recently freed first: blocks the steps keep reusing were freed last.
  std::vector<std::multimap<size_t, Cached>::iterator> order;
  order.reserve(s.free_blocks.size());
  for (auto it = s.free_blocks.begin(); it != s.free_blocks.end(); ++it) order.push_back(it);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a->second.freed_at < b->second.freed_at;
  });
  for (auto it : order) {
    if (excess <= 0) break;
    const int64_t size = static_cast<int64_t>(it->first);
    release_block(it->second.p, it->first);
    s.free_blocks.erase(it);
    s.stats.bytes_cached -= size;
    s.stats.num_trimmed_bytes += size;
    excess -= size;
  }
}

}  // namespace lazyx::runtime

namespace lazyx {

MemoryStats memory_stats() { return runtime::allocator_stats(); }
void reset_peak_memory_stats() { runtime::allocator_reset_peak(); }
void empty_cache() { runtime::allocator_empty_cache(); }

std::string MemoryStats::to_string() const {
  auto mib = [](int64_t b) { return std::to_string(static_cast<double>(b) / (1 << 20)) + " MiB"; };
  return "bytes_in_use: " + mib(bytes_in_use) + ", peak_bytes: " + mib(peak_bytes) +
         ", bytes_cached: " + mib(bytes_cached) + ", allocs: " + std::to_string(num_allocs) +
         " (fresh: " + std::to_string(num_fresh_allocs) + "), trimmed: " + mib(num_trimmed_bytes);
}

}  // namespace lazyx
