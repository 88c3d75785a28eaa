// LLVM code generation for the CPU backend: fused elementwise loops compiled in-process with
// LLVM 19's ORC LLJIT, optimized at O3 for the host CPU, with Sleef vector math.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace lazyx::cpu {

// One fused loop over a group of elementwise instructions of one shape.
struct FusedSpec {
  Shape shape;                   // every member has this shape
  std::vector<int32_t> members;  // instruction indices, topological order
  struct Input {
    int32_t instr;               // producer outside the group
    int32_t arg = -1;            // buffer argument; -1: a Scalar instruction read from scalars
    Shape strides;               // element strides in `shape` (0 on broadcast dims)
  };
  std::vector<Input> inputs;
  struct Output {
    int32_t instr;
    int32_t arg;                 // buffer argument written contiguously in `shape`
  };
  std::vector<Output> outputs;
  int32_t num_args = 0;
  // A reduction (Sum, Mean, Amax, Amin over attrs.ints) of one member, computed in the same
  // loop: the loop then runs over output elements [start, end) with the reduced dims inside.
  int32_t reduce_instr = -1;
  int32_t reduce_arg = -1;
};

// A reduction over `dims` of a value computed by an optional fused elementwise prologue.
// Not every reduction qualifies; see the planner.
using KernelFn = void (*)(void* const* bufs, const backend::ScalarValue* scalars, int64_t start,
                          int64_t end);

// Whether the code generator handles this elementwise instruction inside a fused loop.
bool fusable(const backend::LoweredGraph& g, int32_t instr);
// Whether a reduction can be computed by the fused loop of the group that produces its input
// (group shape = its input's shape).
bool reduction_fusable(const backend::LoweredGraph& g, int32_t instr);
// Whether the reduced dims of `instr` merge into one loop for arrays with these strides over
// `shape` (the group's operands and outputs).
bool reduction_mergeable(const backend::LoweredGraph& g, int32_t instr, const Shape& shape,
                         const std::vector<Shape>& strides);

// The compiled code of one program; freeing it frees the machine code.
class CompiledModule {
 public:
  virtual ~CompiledModule() = default;
};

// Compiles every spec into one module. Raises lazyx::Error naming the op on failure.
std::vector<KernelFn> compile_fused(const backend::LoweredGraph& g,
                                    const std::vector<FusedSpec>& specs,
                                    std::unique_ptr<CompiledModule>& keep);

}  // namespace lazyx::cpu
