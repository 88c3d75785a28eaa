// Inspection and backend control.
#pragma once

#include <string>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx {

// The pending graph behind `tensors`, as text (like torch_xla's _get_xla_tensors_text) or DOT.
std::string graph_text(const std::vector<Tensor>& tensors);
std::string graph_dot(const std::vector<Tensor>& tensors);

// The active backend, chosen by LAZYX_BACKEND at first use (default: cpu where built, else
// reference). Every backend keeps buffers in host
// memory, so live tensors carry over a switch; compiled programs are per backend.
std::string backend_name();
std::vector<std::string> backend_names();
void set_backend(const std::string& name);
// Simulates losing the device: while dead, work that needs it raises lazyx::Error and leaves
// every tensor as it was.
void set_backend_alive(bool alive);

// Number of programs in the compilation cache.
int64_t program_cache_size();
void clear_program_cache();
// The cpu backend compiles new kernels quickly first and recompiles them with full optimization
// in the background (LAZYX_CPU_TIERED); this waits until that is done (benchmarks, tests).
void wait_for_background_compiles();
// Threads the active backend runs at once: at most its pool's size (the cpu backend's is
// LAZYX_NUM_THREADS, default all cores, and fixes how work is split, so results do not change).
// Raises for n outside 1..get_max_threads(); 1 on backends without threads.
void set_num_threads(int n);
int get_num_threads();
int get_max_threads();

}  // namespace lazyx
