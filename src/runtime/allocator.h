// A caching allocator: freed blocks are kept by size and reused, because a fresh 4 KiB page costs
// ~2.6 us here. Large blocks are mmap'ed with huge pages.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lazyx/memory.h"

namespace lazyx::runtime {

void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes);
MemoryStats allocator_stats();
void allocator_reset_peak();
void allocator_empty_cache();
// After a step: releases cached blocks, least recently freed first, until bytes in use plus
// cached are at most `limit_percent` % of the peak in use over the last few steps.
void trim_cache(int64_t limit_percent);
// LAZYX_CACHE_LIMIT (default 100); raises on an invalid value.
int64_t cache_limit_percent();
// The block size a request is rounded to (what bytes_in_use counts).
size_t allocation_size(size_t bytes);
// Test hook: the next `n` allocations succeed, then every one raises as if memory ran out;
// a negative n (the default) turns the failures off.
void fail_allocation_after(int64_t n);

}  // namespace lazyx::runtime
