// Convolutions on the cpu backend through oneDNN float32 primitives (16-bit floats widen to
// float32 and round once): forward, backward data and backward weights, built once per compiled
// program, run single-threaded per piece with the batch split across the backend's thread pool.
// float64 and integers run the reference kernel.
#pragma once

#include <memory>
#include <vector>

#include "backends/reference/kernels.h"

namespace lazyx::cpu {

struct ConvCache;

// The primitives for every Conv* instruction of `g` that oneDNN takes, or null if none.
// `threads` > 0 overrides the pool's size for the partition (tests).
std::shared_ptr<ConvCache> make_conv_cache(const backend::LoweredGraph& g, int threads = 0);
// Runs instruction `instr` through its cached primitives; false if it has none (then the caller
// runs the reference kernel).
bool run_dnnl_conv(const ConvCache& cache, int32_t instr,
                   const std::vector<const reference::Val*>& a, const reference::Val& out);

}  // namespace lazyx::cpu
