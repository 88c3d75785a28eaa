// oneDNN was measured against OpenBLAS at our shapes (BENCHMARKS.md, "CPU backend"): with the
// OPENBLAS_CORETYPE=Haswell setting of these machines OpenBLAS reaches about half of oneDNN's
// single-thread rate, and without it the two are on par. oneDNN threads with OpenMP; we give
// it the pool's thread count. oneDNN has no float64 GEMM, so float64 goes to OpenBLAS's dgemm.
#include "backends/cpu/gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "ir/shape_infer.h"

namespace lazyx::cpu {

namespace {
// k == 0: the product is zero, so out = beta * out.
void scale_out(float* out, int64_t count, float beta) {
  if (beta == 0) {
    std::memset(out, 0, static_cast<size_t>(count) * sizeof(float));
  } else if (beta != 1) {
    for (int64_t i = 0; i < count; ++i) out[i] *= beta;
  }
}

// Calls f(i, offset of a, offset of b) for every matrix i of the batch, in row-major order; the
// operands' batch strides are in elements (0 where one broadcasts).
template <class F>
void for_each_matrix(const Shape& batch, const GemmOperand& ao, const GemmOperand& bo, F f) {
  std::vector<int64_t> idx(batch.size(), 0);
  const int64_t nb = ir::shape_numel(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = ao.offset, ob = bo.offset;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * ao.batch[d];
      ob += idx[d] * bo.batch[d];
    }
    f(bi, oa, ob);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

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
  openblas_set_num_threads(static_cast<int>(ThreadPool::get().size()));
  const auto* A = reinterpret_cast<const double*>(a.data);
  const auto* B = reinterpret_cast<const double*>(b.data);
  auto bl = [](int64_t v) { return static_cast<blasint>(v); };
  for_each_matrix(batch, ao, bo, [&](int64_t bi, int64_t oa, int64_t ob) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bl(n), bl(m), bl(k), 1.0, A + oa, bl(k),
                B + ob, bl(m), 0.0, C + bi * n * m, bl(m));
  });
}

void gemm_matmul_views(const Shape& batch, int64_t n, int64_t m, int64_t k, const float* a,
                       const GemmOperand& ao, const float* b, const GemmOperand& bo, float* out,
                       float alpha, float beta) {
  const int64_t nb = ir::shape_numel(batch);
  if (n == 0 || m == 0 || nb == 0) return;
  if (k == 0) {
    scale_out(out, nb * n * m, beta);
    return;
  }
  const int64_t lda = ao.ld < 0 ? k : ao.ld, ldb = bo.ld < 0 ? m : bo.ld;
  omp_set_num_threads(ThreadPool::get().size());
  for_each_matrix(batch, ao, bo, [&](int64_t bi, int64_t oa, int64_t ob) {
    dnnl_status_t st = dnnl_sgemm(ao.trans, bo.trans, n, m, k, alpha, a + oa, lda, b + ob, ldb,
                                  beta, out + bi * n * m, m);
    if (st != dnnl_success) {
      ir::fail("matmul",
               "oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)) + ".");
    }
  });
}

}  // namespace lazyx::cpu
