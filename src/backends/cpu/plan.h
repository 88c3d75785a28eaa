// The cpu backend's program: a lowered graph planned into steps (fused LLVM loops, GEMM calls
// and reference kernels), with every value's location (parameter, scalar, arena offset, output).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/gemm.h"

namespace lazyx::cpu {

constexpr int64_t kAlign = 64;
// Instructions per fused loop at most: beyond a few hundred, LLVM's register allocation and
// scheduling grow faster than linearly. Longer chains split into loops of this size, and the
// identical ones among them compile once (kernels are shared by their IR).
constexpr size_t kMaxFusedOps = 256;

// Check: the index checks of a Ref step's op, run as soon as its indices are computed.
enum class StepKind : uint8_t { Fused, Ref, Matmul, Check };

struct Step {
  StepKind kind;
  int32_t instr = -1;             // Ref / Matmul / Check
  int32_t spec = -1;              // Fused
  std::vector<int32_t> arg_instr; // Fused: the instruction whose storage each argument is
  int64_t numel = 0;
  int64_t inner = 1;              // work per index of the parallel range
  int32_t reduce = -1;            // Fused reduction: its instruction
  bool split = false;             // the reduction's partial results combine (splittable)
  std::vector<GemmOperand> gemm;  // Matmul: operands read as strided views, or empty
  // Matmul: out = alpha * (a @ b) + beta * out, alpha times the Scalar alpha_scalar when >= 0
  // (an accumulating epilogue through the library's beta; beta == 0: a plain product).
  float alpha = 1, beta = 0;
  int32_t alpha_scalar = -1;
  // Fused: (scatter instruction, its base) copied before the loop when their storage differs.
  std::vector<std::pair<int32_t, int32_t>> pre_copies;
};

enum class LocKind : uint8_t { None, Param, Scalar, Arena, Output };
struct Loc {
  LocKind kind = LocKind::None;
  int64_t v = 0;  // param slot, arena offset or output index
};

struct Copy {
  int32_t src_instr;  // read from this instruction's location
  int32_t out;        // into this output's buffer
};

struct ConvCache;  // dnnl_conv.h

class CpuProgram : public backend::Program {
 public:
  backend::LoweredGraph g;
  std::vector<Step> steps;
  std::vector<FusedSpec> specs;
  std::vector<KernelFn> kernels;
  std::unique_ptr<CompiledModule> code;
  std::vector<Loc> loc;
  std::shared_ptr<ConvCache> conv;  // oneDNN convolution primitives, or null
  std::vector<Loc> temp_loc;       // per output: a temporary for a deferred donated output
  std::vector<Copy> leaf_copies;   // outputs whose value is a parameter or scalar
  std::vector<int32_t> deferred;   // donated outputs computed into a temporary
  std::vector<Copy> dup_copies;    // repeated outputs
  std::vector<char> fresh_output;  // outputs the backend allocates
  int64_t arena_bytes = 0;
  std::string why_scratch;  // the first donated output computed into a temporary, and why
  int64_t scratch_bytes() const override { return arena_bytes; }
  std::string scratch_reason() const override { return why_scratch; }
};

// First-fit offsets in one arena for values with known lifetimes.

int64_t value_bytes(const backend::Instr& in);
// Fusion groups, their order, the arena plan and in-place decisions for donated outputs.
std::unique_ptr<CpuProgram> plan(const backend::LoweredGraph& g);

}  // namespace lazyx::cpu
