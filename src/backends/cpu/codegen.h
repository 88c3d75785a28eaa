// LLVM code generation for the CPU backend: fused elementwise loops compiled in-process with
// LLVM 19's ORC LLJIT, optimized at O3 for the host CPU, with Sleef vector math.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace lazyx::cpu {

// One fused loop over a group of elementwise instructions of one shape. AsStrided members read
// their operand's storage through their view; AsStridedScatter members store at their view.
struct FusedSpec {
  Shape shape;                   // every member has this shape
  std::vector<int32_t> members;  // instruction indices, topological order
  struct Input {
    int32_t instr;               // producer outside the group, or an AsStrided member
    int32_t arg = -1;            // buffer argument; -1: a Scalar instruction read from scalars
    Shape strides;               // element strides in `shape` (0 on broadcast dims)
    int32_t src = -1;            // AsStrided member: the operand whose storage is read
    int64_t offset = 0;          // element offset of the read (AsStrided)
    int32_t storage() const { return src >= 0 ? src : instr; }
  };
  std::vector<Input> inputs;
  struct Output {
    int32_t instr;
    int32_t arg;                 // buffer argument written contiguously in `shape`
    // AsStridedScatter: operand 1's value stored at offset + sum(index * strides) of the
    // buffer, which holds a copy of operand 0 before the loop runs.
    bool scatter = false;
    Shape strides;
    int64_t offset = 0;
  };
  std::vector<Output> outputs;
  int32_t num_args = 0;
  // A reduction (Sum, Mean, Amax, Amin, LogSumExp, Argmax over attrs.ints) or a normalization
  // (Softmax, LogSoftmax over attrs.i0) of one member, computed in the same loop: the loop then
  // runs over kept (output) elements [start, end) with the reduced dim inside.
  int32_t reduce_instr = -1;
  int32_t reduce_arg = -1;
};

// Reduction geometry of a spec with reduce_instr >= 0: kept elements and reduced length.
void reduce_extent(const backend::LoweredGraph& g, const FusedSpec& s, int64_t& kept,
                   int64_t& reduced);
// The dims a reduction-like op reduces (Softmax: its dim).
std::vector<int64_t> reduced_dims(const backend::Instr& in);
bool is_normalization(ir::Op op);  // Softmax, LogSoftmax
// Whether a reduction's partial results over slices of the reduced dim can be combined
// (Sum, Mean, Amax, Amin): then a reduction with few outputs splits its reduced dim.
bool splittable(ir::Op op);

// Every kernel: for kept/elementwise indices [start, end) (and, for reductions, the reduced
// range [j0, j1)). With partial != null a splittable reduction stores its raw accumulators
// (double for floating or Mean, int64 otherwise) at partial[o - start] instead of its output.
using KernelFn = void (*)(void* const* bufs, const backend::ScalarValue* scalars, int64_t start,
                          int64_t end, int64_t j0, int64_t j1, void* partial);

// Whether the code generator handles this elementwise instruction inside a fused loop.
bool fusable(const backend::LoweredGraph& g, int32_t instr);
// Whether an AsStridedScatter can be the strided store of a fused loop over its operand 1: the
// view writes every position at most once, and the dtypes agree.
bool scatter_fusable(const backend::LoweredGraph& g, int32_t instr);
// Whether a reduction can be computed by the fused loop of the group that produces its input
// (group shape = its input's shape).
bool reduction_fusable(const backend::LoweredGraph& g, int32_t instr);
// Whether the reduced dims of `instr` merge into one loop for arrays with these strides over
// `shape` (the group's operands and outputs).
bool reduction_mergeable(const backend::LoweredGraph& g, int32_t instr, const Shape& shape,
                         const std::vector<Shape>& strides);

// Elementwise math of later compiles: Sleef's 3.5-ULP functions where it has them (Fast, the
// default) or its 1-ULP ones (Precise). Kernels of the two modes have different IR, hence
// different in-process and persistent cache keys.
enum class MathMode { Fast, Precise };
// LAZYX_CPU_MATH: fast (default) or precise; anything else raises.
MathMode math_mode_from_env();
MathMode math_mode();
const char* math_mode_name(MathMode m);
// Returns whether the mode changed.
bool set_math_mode(MathMode m);

// The compiled code of one program; freeing it frees the machine code.
class CompiledModule {
 public:
  virtual ~CompiledModule() = default;
};

// Tiered compilation (LAZYX_CPU_TIERED, default on): kernels missing from every cache compile
// at a quick tier first and are recompiled at the full tier in the background (tiered.h).
bool tiered_compile();
// Swaps in the program's kernels that finished at the full tier since the last call.
int64_t take_upgrades(CompiledModule& code, std::vector<KernelFn>& fns);
// Blocks until the background compiler is idle (tests and benchmarks).
void wait_for_upgrades();

// Compiles every spec into one module. Raises lazyx::Error naming the op on failure.
std::vector<KernelFn> compile_fused(const backend::LoweredGraph& g,
                                    const std::vector<FusedSpec>& specs,
                                    std::unique_ptr<CompiledModule>& keep);

}  // namespace lazyx::cpu
