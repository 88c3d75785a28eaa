// Why a sync happens and why it compiled (diagnostics.cpp, recompile.cpp): the executor's hooks
// for debug output, strict mode, compile-cause counters and the timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/executor.h"
#include "lazyx/step.h"

namespace lazyx::graph::diag {

struct SyncContext {
  std::string cause;                // "user mark_step", "value read by item()", ...
  std::vector<std::string> frames;  // the caller's, innermost first
  SyncKind kind = SyncKind::MarkStep;
  int level = 0;                    // LAZYX_DEBUG (or set_debug) for this sync, read once
  double start_us = -1;             // on the timeline, while profiling
};

// At the start of a sync that has work. `what` names a value read's op (item, to_vector,
// copy_to_host) or is null; `level` is level(), read once by the caller. Raises lazyx::Error in
// strict mode for anything but mark_step.
SyncContext begin_sync(SyncKind kind, const char* op, const char* what, int level);

// On a program-cache miss, before compiling: the nearest program compiled earlier at the same
// site and what differs, in words ("" for a site's first compile); counts
// CompileCause:<kind> and warns once when compiles keep happening.
std::string explain_compile(const SyncContext& ctx, const backend::LoweredGraph& g,
                            const std::vector<ParamReport>& params, uint64_t key);

// At the end of a sync: debug output and the timeline's sync span.
void end_sync(const SyncContext& ctx, const StepReport& r);

// Debug output of the current level (LAZYX_DEBUG or set_debug).
int level();
int max_frames();  // LAZYX_DEBUG_MAX_FRAMES
// Forgets every site's compile history and re-arms the recompile warning (for tests).
void reset_history();
void print(const std::string& text);

// Recompile explanation (recompile.cpp): the graph of a compiled program, as the differ needs it.
struct Signature {
  uint64_t key = 0;
  backend::LoweredGraph graph;
  std::vector<ParamReport> params;
};
struct Difference {
  // input_shape, input_dtype, donation, op, baked_constant, scalar, new_scalar, structure
  const char* kind;
  std::string text;
};
std::vector<Difference> differences(const Signature& now, const Signature& before);

}  // namespace lazyx::graph::diag
