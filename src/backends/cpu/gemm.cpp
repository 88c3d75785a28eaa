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
  const Shape& os = out.shape;
  size_t r = os.size();
  int64_t n = os[r - 2], m = os[r - 1], k = a.shape.back();
  if (n == 0 || m == 0) return;
  Shape batch(os.begin(), os.end() - 2);
  Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  auto batch_strides = [&](const Shape& s) {
    Shape st(batch.size(), 0);
    int64_t acc = 1;
    size_t lead = batch.size() - s.size();
    for (size_t d = s.size(); d-- > 0;) {
      st[d + lead] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
    return st;
  };
  Shape sa = batch_strides(ab), sb = batch_strides(bb);
  int64_t nb = ir::shape_numel(batch);
  const float* A = reinterpret_cast<const float*>(a.data);
  const float* B = reinterpret_cast<const float*>(b.data);
  float* Cm = reinterpret_cast<float*>(out.data);
  if (k == 0) {
    if (f64) {
      std::memset(out.data, 0, static_cast<size_t>(nb * n * m) * sizeof(double));
    } else {
      scale_out(Cm, nb * n * m, beta);
    }
    return;
  }
  if (f64) {
    openblas_set_num_threads(static_cast<int>(ThreadPool::get().size()));
  } else {
    omp_set_num_threads(ThreadPool::get().size());
  }
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    dnnl_status_t st = dnnl_success;
    if (f64) {
      const double* A64 = reinterpret_cast<const double*>(a.data);
      const double* B64 = reinterpret_cast<const double*>(b.data);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(n),
                  static_cast<blasint>(m), static_cast<blasint>(k), 1.0, A64 + oa * n * k,
                  static_cast<blasint>(k), B64 + ob * k * m, static_cast<blasint>(m), 0.0,
                  reinterpret_cast<double*>(out.data) + bi * n * m, static_cast<blasint>(m));
    } else {
      st = dnnl_sgemm('N', 'N', n, m, k, alpha, A + oa * n * k, k, B + ob * k * m, m, beta,
                      Cm + bi * n * m, m);
    }
    if (st != dnnl_success) {
      ir::fail("matmul",
               "oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)) + ".");
    }
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
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
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = ao.offset, ob = bo.offset;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * ao.batch[d];
      ob += idx[d] * bo.batch[d];
    }
    dnnl_status_t st = dnnl_sgemm(ao.trans, bo.trans, n, m, k, alpha, a + oa, lda, b + ob, ldb,
                                  beta, out + bi * n * m, m);
    if (st != dnnl_success) {
      ir::fail("matmul",
               "oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)) + ".");
    }
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace lazyx::cpu
