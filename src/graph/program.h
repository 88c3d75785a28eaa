// A compiled program in the cache, with what the executor needs to run it again.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace lazyx::graph {

struct CachedProgram {
  std::unique_ptr<backend::Program> program;
  std::string backend;
  int64_t num_donated = 0;
  // Checked on every hit, so a 64-bit key collision fails loudly instead of running the wrong
  // program.
  size_t num_instrs = 0, num_params = 0, num_scalars = 0, num_outputs = 0;
  double compile_ms = 0;
};

}  // namespace lazyx::graph
