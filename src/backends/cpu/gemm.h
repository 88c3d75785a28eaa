// Matmul for the cpu backend: float32 through oneDNN's sgemm, float64 through OpenBLAS's
// dgemm, other dtypes through the reference kernel. Both libraries run single-threaded; large
// GEMMs are split into blocks (batches, row or column ranges) run on the backend's thread pool.
#pragma once

#include "backends/reference/kernels.h"

namespace lazyx::cpu {

// A float32 operand as sgemm reads it: `instr`'s storage from element `offset`, rows `ld`
// apart, transposed when trans == 'T' (ld < 0: the matrix is contiguous); matrix b of the batch
// starts `batch` element strides (one per output batch dim, 0 when broadcast) further on.
struct GemmOperand {
  int32_t instr = -1;
  int64_t offset = 0;
  int64_t ld = -1;
  char trans = 'N';
  Shape batch;
};

// How a batch of nb GEMMs (n x k times k x m) is spread over `threads` threads: each matrix is
// cut into `pieces` blocks of rows (by_rows) or columns, and the nb * pieces blocks are dealt to
// the threads. parallel == false: the whole call runs on the calling thread (too small to gain).
struct GemmPartition {
  bool parallel = false;
  bool by_rows = true;
  int64_t pieces = 1;
};
GemmPartition gemm_partition(int64_t nb, int64_t n, int64_t m, int64_t k, int threads);
// Block `piece` of a dimension of `size` cut into `pieces` blocks whose starts are multiples of
// `align`: [begin, end), possibly empty.
std::pair<int64_t, int64_t> gemm_block(int64_t size, int64_t pieces, int64_t piece, int64_t align);

// out = alpha * (a @ b) + beta * out; alpha and beta other than (1, 0) need float32.
void gemm_matmul(const backend::Instr& in, const reference::Val& a, const reference::Val& b,
                 const reference::Val& out, float alpha = 1, float beta = 0);
// For every index of `batch`: out (n x m, contiguous) = alpha * a (n x k) * b (k x m) + beta * out
// in float32, the operands read as described. `threads` > 0 overrides the partition's thread
// count (tests); the blocks run on the pool either way.
void gemm_matmul_views(const Shape& batch, int64_t n, int64_t m, int64_t k, const float* a,
                       const GemmOperand& ao, const float* b, const GemmOperand& bo, float* out,
                       float alpha = 1, float beta = 0, int threads = 0);

}  // namespace lazyx::cpu
