// Matmul for the cpu backend: float32 through oneDNN's sgemm, other dtypes through the
// reference kernel.
#pragma once

#include "backends/reference/kernels.h"

namespace lazyx::cpu {

// A 2-D float32 operand as sgemm reads it: `instr`'s storage from element `offset`, rows
// `ld` apart, transposed when trans == 'T'. ld < 0: the operand is contiguous.
struct GemmOperand {
  int32_t instr = -1;
  int64_t offset = 0;
  int64_t ld = -1;
  char trans = 'N';
};

void gemm_matmul(const backend::Instr& in, const reference::Val& a, const reference::Val& b,
                 const reference::Val& out);
// out (n x m) = a (n x k) * b (k x m) in float32, each operand read as described.
void gemm_matmul_views(int64_t n, int64_t m, int64_t k, const float* a, const GemmOperand& ao,
                       const float* b, const GemmOperand& bo, float* out);

}  // namespace lazyx::cpu
