// Matmul for the cpu backend: float32 through oneDNN's sgemm, other dtypes through the
// reference kernel.
#pragma once

#include "backends/reference/kernels.h"

namespace lazyx::cpu {

void gemm_matmul(const backend::Instr& in, const reference::Val& a, const reference::Val& b,
                 const reference::Val& out);

}  // namespace lazyx::cpu
