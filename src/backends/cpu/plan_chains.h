// The in-place side of the cpu plan: which donated outputs, and which earlier versions of their
// tensors (chains of in-place updates), are written straight into the donated buffer (rule 6 of
// ALIASING.md), and the step report's words when a full-size copy is still needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/plan.h"

namespace lazyx::cpu {

// One unit of the plan: a fused loop, or a single GEMM or reference kernel.
struct PlanUnit {
  std::vector<int32_t> members;
  bool fused = false;
  Shape shape;
  int32_t reduce = -1;  // a reduction computed by this group's loop; closes the group
  bool has_arange = false;
  bool has_scatter = false;  // stores an AsStridedScatter at its view's positions
};

// Strides of operand shape s broadcast into out (0 on broadcast dims), as the reference does.
Shape broadcast_strides(const Shape& s, const Shape& out);

// Per output: the earlier versions of its tensor between it and its donor parameter along
// operand 0, each written over its operand 0 (x[0:2].add_ twice, mul_ then index_put_), oldest
// first. Empty for outputs that are not donated or not such a chain of updates.
std::vector<std::vector<int32_t>> donated_chains(const backend::LoweredGraph& g,
                                                 const std::vector<int32_t>& donor_of_output);

// The instructions that read each value's storage (a GEMM: through the operands it reads).
std::vector<std::vector<int32_t>> storage_readers(
    const backend::LoweredGraph& g, const std::vector<std::vector<GemmOperand>>& gemm_ops);

// What the in-place checks read from the plan, once units are ordered and storage is known.
struct InPlaceContext {
  const backend::LoweredGraph& g;
  const std::vector<PlanUnit>& units;
  const std::vector<int32_t>& unit_of;  // per instruction
  const std::vector<int32_t>& pos;      // per unit: its place in the order
  const std::vector<char>& is_scatter;  // fused AsStridedScatter members
  const std::vector<char>& skipped;     // per unit: loops that do not run
  const std::vector<char>& needs;       // per instruction: values that get storage
  const std::vector<std::vector<GemmOperand>>& gemm_ops;
  const std::vector<std::vector<int32_t>>& readers;  // storage_readers()
  int32_t last_failing;  // the last position of a unit that can fail, or -1
};

// Whether w may be written over the buffer holding v, or what forbids it.
enum class Overwrite : uint8_t { Ok, CanFail, ReadsOther, ReadAfter };
Overwrite may_overwrite(const InPlaceContext& c, int32_t v, int32_t w);

// The step report's words for instruction `in` (what: "output" or "updating output") written
// to a full-size temporary instead of the donated buffer of output `out`.
std::string copy_reason(const backend::Instr& in, const char* what, int32_t out, Overwrite why);

// Places the links of output o's chain in its donated buffer, oldest first, while each may
// overwrite the version before it (loc Output, storage_key the donor pi). Returns the value the
// buffer holds before the output itself is written; notes the first link copied in `why`.
int32_t place_chain(const InPlaceContext& c, const std::vector<int32_t>& chain, int32_t o,
                    int32_t pi, std::vector<Loc>& loc, std::vector<int32_t>& storage_key,
                    std::vector<int32_t>& chain_out, std::string& why);

}  // namespace lazyx::cpu
