// The GEMM side of the cpu plan: which matmul operands sgemm reads through their views, and
// which matmuls absorb the add/sub that consumes them (accumulating epilogues, alpha and beta),
// and 16-bit matmuls rewritten to run in float32.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/gemm.h"

namespace lazyx::cpu {

// Batch strides of an operand of shape s with element strides st, over the output's batch dims
// (right-aligned; 0 where the operand broadcasts).
Shape gemm_batch_strides(const Shape& s, const Shape& st, const Shape& out);

// A float32 AsStrided operand of a float32 matmul that sgemm can read in place: each matrix has
// contiguous rows or columns with a leading dimension; batch dims may have any strides.
bool gemm_view(const backend::LoweredGraph& g, int32_t c, const Shape& out, GemmOperand& op);

// An accumulating epilogue of matmul m (see plan()): c = beta * y + alpha * scale * m, alpha and
// beta +-1, scale a Scalar (a mul by it, or add/sub's alpha) or 1, y a parameter of m's shape.
struct Accum {
  int32_t m = -1, t = -1, c = -1, y = -1;
  int32_t scale = -1;  // the Scalar multiplying the product, or -1
  float alpha = 1, beta = 1;
};

// Whether matmul m is read only by such a c (consumer/nuses: each value's last reader and number
// of distinct readers; group: fused unit or -1; outputs: output indices per value). Fills a.
bool accum_candidate(const backend::LoweredGraph& g, int32_t m,
                     const std::vector<int32_t>& consumer, const std::vector<int32_t>& nuses,
                     const std::vector<int32_t>& group,
                     const std::vector<std::vector<int32_t>>& outputs, Accum& a);

// g with every float16/bfloat16 matmul computed in float32: its operands cast up, one sgemm,
// the product rounded once (how PyTorch's CPU bfloat16 GEMM accumulates). Other matmuls keep
// their dtype; integer ones use the reference kernel, whose int64 wrap-around no float GEMM has.
backend::LoweredGraph widen_half_matmuls(const backend::LoweredGraph& g);

}  // namespace lazyx::cpu
