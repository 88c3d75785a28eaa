// Memory statistics of the caching allocator, as torch.cuda.memory_stats() reports them.
#pragma once

#include <cstdint>
#include <string>

namespace lazyx {

struct MemoryStats {
  int64_t bytes_in_use = 0;       // held by live buffers
  int64_t peak_bytes = 0;         // maximum of bytes_in_use since the last reset
  int64_t bytes_cached = 0;       // freed blocks kept for reuse
  int64_t num_allocs = 0;         // allocations served
  int64_t num_fresh_allocs = 0;   // of which went to the OS for new memory
  int64_t num_trimmed_bytes = 0;  // cached bytes returned to the OS after steps (LAZYX_CACHE_LIMIT)
  std::string to_string() const;
};

MemoryStats memory_stats();
void reset_peak_memory_stats();
// Returns cached blocks to the OS.
void empty_cache();

}  // namespace lazyx
