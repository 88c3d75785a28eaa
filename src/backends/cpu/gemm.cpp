// oneDNN was measured against OpenBLAS at our shapes (BENCHMARKS.md, "CPU backend"): with the
// OPENBLAS_CORETYPE=Haswell setting of these machines OpenBLAS reaches about half of oneDNN's
// single-thread rate, and without it the two are on par. oneDNN has no float64 GEMM, so float64
// goes to OpenBLAS's dgemm. Neither library threads: their own runtimes (OpenMP, OpenBLAS's
// pthreads) busy-wait and would fight the pool for the same cores, so each call runs on one
// thread and large GEMMs are partitioned across the pool here.
#include "backends/cpu/gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "graph/profile.h"
#include "ir/shape_infer.h"

namespace lazyx::cpu {

namespace {
// Below this many flops a GEMM runs on the calling thread: waking a worker costs more than
// it saves (about 20-40 us of single-thread work).
constexpr double kParallelFlops = 4e6;
constexpr int64_t kRowAlign = 8, kColAlign = 16;  // block starts: register tile, cache line
constexpr int64_t kPiecesPerThread = 2;           // a stalled thread delays half its share

// oneDNN sizes its OpenMP team from omp_get_max_threads(), a per-thread setting: 1 on the calling
// thread for the call, restored after (torch, in the same process, uses the same runtime).
class OmpSingleThread {
 public:
  OmpSingleThread() : prev_(omp_get_max_threads()) {
    if (prev_ != 1) omp_set_num_threads(1);
  }
  ~OmpSingleThread() {
    if (prev_ != 1) omp_set_num_threads(prev_);
  }
  OmpSingleThread(const OmpSingleThread&) = delete;
  OmpSingleThread& operator=(const OmpSingleThread&) = delete;

 private:
  int prev_;
};

// OpenBLAS's thread count is process-wide: 1 for the duration of a call, restored after.
class BlasSingleThread {
 public:
  BlasSingleThread() : prev_(openblas_get_num_threads()) {
    if (prev_ != 1) openblas_set_num_threads(1);
  }
  ~BlasSingleThread() {
    if (prev_ != 1) openblas_set_num_threads(prev_);
  }
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  int prev_;
};

// k == 0: the product is zero, so out = beta * out.
void scale_out(float* out, int64_t count, float beta) {
  if (beta == 0) {
    std::memset(out, 0, static_cast<size_t>(count) * sizeof(float));
  } else if (beta != 1) {
    for (int64_t i = 0; i < count; ++i) out[i] *= beta;
  }
}

// The offsets of a and b for every matrix of the batch, in row-major order; the operands'
// batch strides are in elements (0 where one broadcasts).
std::vector<std::pair<int64_t, int64_t>> matrix_offsets(const Shape& batch, const GemmOperand& ao,
                                                        const GemmOperand& bo) {
  std::vector<int64_t> idx(batch.size(), 0);
  const int64_t nb = ir::shape_numel(batch);
  std::vector<std::pair<int64_t, int64_t>> offs(static_cast<size_t>(nb));
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = ao.offset, ob = bo.offset;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * ao.batch[d];
      ob += idx[d] * bo.batch[d];
    }
    offs[bi] = {oa, ob};
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

// Runs block(bi, r0, r1, c0, c1) over every matrix bi < nb, partitioned as gemm_partition says:
// rows [r0, r1) and columns [c0, c1) of that matrix's n x m output.
// While profiling, each call is a span on its thread ("gemm n x k x m", the block in args).
template <class Block>
void run_blocks(int64_t nb, int64_t n, int64_t m, int64_t k, int threads, Block block_call) {
  const bool traced = profile::on();
  const std::string name = traced ? "gemm " + std::to_string(nb) + "x[" + std::to_string(n) +
                                        " x " + std::to_string(k) + " x " + std::to_string(m) + "]"
                                  : std::string();
  auto block = [&](int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (!traced) return block_call(bi, r0, r1, c0, c1);
    const double t0 = profile::now_us();
    block_call(bi, r0, r1, c0, c1);
    profile::record(name, "gemm", t0, profile::now_us(),
                    "\"batch\": " + std::to_string(bi) + ", \"rows\": [" + std::to_string(r0) +
                        ", " + std::to_string(r1) + "], \"cols\": [" + std::to_string(c0) + ", " +
                        std::to_string(c1) + "]");
  };
  ThreadPool& pool = ThreadPool::get();
  const GemmPartition p = gemm_partition(nb, n, m, k, threads > 0 ? threads : pool.size());
  if (!p.parallel) {
    for (int64_t bi = 0; bi < nb; ++bi) block(bi, 0, n, 0, m);
    return;
  }
  pool.parallel_for(nb * p.pieces, 1, 0, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bi = t / p.pieces, piece = t % p.pieces;
      if (p.by_rows) {
        auto [r0, r1] = gemm_block(n, p.pieces, piece, kRowAlign);
        if (r0 < r1) block(bi, r0, r1, 0, m);
      } else {
        auto [c0, c1] = gemm_block(m, p.pieces, piece, kColAlign);
        if (c0 < c1) block(bi, 0, n, c0, c1);
      }
    }
  });
}

}  // namespace

GemmPartition gemm_partition(int64_t nb, int64_t n, int64_t m, int64_t k, int threads) {
  GemmPartition p;
  const double flops = 2.0 * static_cast<double>(nb) * n * m * k;
  if (threads <= 1 || flops < kParallelFlops) return p;
  // Batches alone balance when there are many or they divide evenly.
  if (nb >= 4 * threads || nb % threads == 0) {
    p.parallel = true;
    return p;
  }
  // Otherwise cut each matrix too. A row block re-reads all of b, a column block all of a: cut
  // the dimension whose blocks duplicate the smaller operand.
  p.by_rows = n >= m;
  const int64_t align = p.by_rows ? kRowAlign : kColAlign;
  const int64_t units = ((p.by_rows ? n : m) + align - 1) / align;
  p.pieces = std::max<int64_t>(1, std::min<int64_t>(units, threads * kPiecesPerThread));
  p.parallel = nb * p.pieces > 1;
  return p;
}

std::pair<int64_t, int64_t> gemm_block(int64_t size, int64_t pieces, int64_t piece, int64_t align) {
  const int64_t units = (size + align - 1) / align;
  return {std::min(size, units * piece / pieces * align),
          std::min(size, units * (piece + 1) / pieces * align)};
}

void gemm_matmul(const backend::Instr& in, const reference::Val& a, const reference::Val& b,
                 const reference::Val& out, float alpha, float beta) {
  const bool f64 = in.dtype == kFloat64 && a.dtype == kFloat64 && b.dtype == kFloat64;
  const bool f32 = in.dtype == kFloat32 && a.dtype == kFloat32 && b.dtype == kFloat32;
  if ((alpha != 1 || beta != 0) && !f32) {
    ir::fail("matmul", "internal: an accumulating GEMM needs float32.");
  }
  if (!f32 && !f64) {  // integer and 16-bit floating matmuls: the reference kernel
    reference::run_matmul(in, a, b, out);
    return;
  }
  // Contiguous operands: matrices n x k and k x m, batch strides from their shapes.
  const Shape& os = out.shape;
  const size_t r = os.size();
  const int64_t n = os[r - 2], m = os[r - 1], k = a.shape.back();
  const Shape batch(os.begin(), os.end() - 2);
  auto operand = [&](const Shape& s) {
    GemmOperand op;
    op.batch.assign(batch.size(), 0);
    Shape cs = ir::contiguous_strides(s);
    for (size_t d = 0, lead = batch.size() + 2 - s.size(); d + 2 < s.size(); ++d) {
      op.batch[d + lead] = s[d] == 1 ? 0 : cs[d];
    }
    return op;
  };
  const GemmOperand ao = operand(a.shape), bo = operand(b.shape);
  if (f32) {
    gemm_matmul_views(batch, n, m, k, reinterpret_cast<const float*>(a.data), ao,
                      reinterpret_cast<const float*>(b.data), bo,
                      reinterpret_cast<float*>(out.data), alpha, beta);
    return;
  }
  const int64_t nb = ir::shape_numel(batch);
  if (n == 0 || m == 0 || nb == 0) return;
  auto* C = reinterpret_cast<double*>(out.data);
  if (k == 0) {
    std::memset(C, 0, static_cast<size_t>(nb * n * m) * sizeof(double));
    return;
  }
  const auto* A = reinterpret_cast<const double*>(a.data);
  const auto* B = reinterpret_cast<const double*>(b.data);
  const auto offs = matrix_offsets(batch, ao, bo);
  auto bl = [](int64_t v) { return static_cast<blasint>(v); };
  BlasSingleThread single;
  run_blocks(nb, n, m, k, 0, [&](int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bl(r1 - r0), bl(c1 - c0), bl(k), 1.0,
                A + offs[bi].first + r0 * k, bl(k), B + offs[bi].second + c0, bl(m), 0.0,
                C + bi * n * m + r0 * m + c0, bl(m));
  });
}

void gemm_matmul_views(const Shape& batch, int64_t n, int64_t m, int64_t k, const float* a,
                       const GemmOperand& ao, const float* b, const GemmOperand& bo, float* out,
                       float alpha, float beta, int threads) {
  const int64_t nb = ir::shape_numel(batch);
  if (n == 0 || m == 0 || nb == 0) return;
  if (k == 0) {
    scale_out(out, nb * n * m, beta);
    return;
  }
  const int64_t lda = ao.ld < 0 ? (ao.trans == 'T' ? n : k) : ao.ld;
  const int64_t ldb = bo.ld < 0 ? (bo.trans == 'T' ? k : m) : bo.ld;
  const auto offs = matrix_offsets(batch, ao, bo);
  run_blocks(nb, n, m, k, threads, [&](int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    // Row r of op(a) starts at r * lda untransposed, at column r of the stored k x n transposed;
    // column c of op(b) likewise.
    const float* ab = a + offs[bi].first + (ao.trans == 'T' ? r0 : r0 * lda);
    const float* bb = b + offs[bi].second + (bo.trans == 'T' ? c0 * ldb : c0);
    OmpSingleThread single;
    dnnl_status_t st = dnnl_sgemm(ao.trans, bo.trans, r1 - r0, c1 - c0, k, alpha, ab, lda, bb, ldb,
                                  beta, out + bi * n * m + r0 * m + c0, m);
    if (st != dnnl_success) {
      ir::fail("matmul",
               "oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)) + ".");
    }
  });
}

}  // namespace lazyx::cpu
