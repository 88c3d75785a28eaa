// CPU backend: float32 matmul at 1024^2 and 2048^2 through lazyx against oneDNN's sgemm called
// directly, float64 matmul at 512^2 against the reference kernel, a batched q @ k^T reading the
// transposed view in place against copying it, a linear layer's bias + relu pass, and the compile
// time of 100- and 1000-node graphs.
// Prints "name value unit" lines.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using bench::median;
using bench::num_threads;
using Clock = std::chrono::steady_clock;

// A graph of `nodes` elementwise ops over x whose op sequence depends on `seed`, so every call
// is a program the cache has not seen.
static Tensor random_graph(const Tensor& x, int nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> vals{x};
  for (int i = 0; i < nodes; ++i) {
    const Tensor& a = vals[rng() % vals.size()];
    const Tensor& b = vals[rng() % vals.size()];
    Tensor r;
    switch (rng() % 6) {
      case 0: r = a + b; break;
      case 1: r = a * b; break;
      case 2: r = a - 0.5; break;
      case 3: r = a.relu(); break;
      case 4: r = a.maximum(b); break;
      default: r = a * 0.25 + 1; break;
    }
    vals.push_back(r);
  }
  Tensor s = vals.back();
  for (size_t i = vals.size() - 8; i + 1 < vals.size(); ++i) s = s + vals[i];
  return s;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const int threads = num_threads();
  set_backend("cpu");
  std::printf("threads %d\n", threads);
  for (int64_t d : {1024, 2048}) {
    std::vector<float> ha(d * d), hb(d * d), hc(d * d);
    for (int64_t i = 0; i < d * d; ++i) {
      ha[i] = static_cast<float>(i % 17) * 0.1f;
      hb[i] = static_cast<float>(i % 13) * 0.1f;
    }
    Tensor a = tensor<float>(ha, {d, d}), b = tensor<float>(hb, {d, d});
    mark_step();
    std::vector<double> lz, direct;
    Tensor c;
    for (int r = 0; r < reps + 2; ++r) {
      c = Tensor();
      auto t0 = Clock::now();
      c = a.matmul(b);
      mark_step();
      auto t1 = Clock::now();
      if (r >= 2) lz.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    omp_set_num_threads(threads);
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = Clock::now();
      dnnl_sgemm('N', 'N', d, d, d, 1.0f, ha.data(), d, hb.data(), d, 0.0f, hc.data(), d);
      auto t1 = Clock::now();
      if (r >= 2) direct.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    double l = median(lz), g = median(direct);
    double gf = 2.0 * d * d * d / 1e6;
    std::printf("matmul_%lld lazyx %.2f ms (%.0f GFLOPS) onednn_direct %.2f ms (%.0f GFLOPS) ratio_direct_over_lazyx %.2f\n",
                static_cast<long long>(d), l, gf / l, g, gf / g, g / l);
  }
  {  // float64 (OpenBLAS dgemm) against the reference backend's kernel, which it replaced.
    const int64_t d = 512;
    std::vector<double> ms[2];
    for (int k = 0; k < 2; ++k) {
      set_backend(k == 0 ? "cpu" : "reference");
      Tensor a = rand({d, d}, kFloat64), b = rand({d, d}, kFloat64);
      mark_step();
      for (int r = 0; r < (k == 0 ? reps + 2 : 3); ++r) {
        auto t0 = Clock::now();
        Tensor c = a.matmul(b);
        mark_step();
        auto t1 = Clock::now();
        if (r >= 1) ms[k].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
    set_backend("cpu");
    double l = median(ms[0]), ref = median(ms[1]);
    std::printf("matmul_f64_%lld lazyx %.2f ms reference_kernel %.2f ms ratio_reference_over_lazyx %.1f\n",
                static_cast<long long>(d), l, ref, ref / l);
  }
  {  // Batched q @ k^T (attention scores): sgemm reads the transposed views in place, against
     // LAZYX_CPU_NO_GEMM_VIEWS=1 (a compiled loop copies the view into scratch first, as before
     // batched views were read in place), alternating rounds.
    Tensor q = rand({8, 8, 256, 64}), k = rand({8, 8, 256, 64});
    mark_step();
    std::vector<double> ms[2];
    for (int round = 0; round < 6; ++round) {
      const int off = round % 2;
      if (off) {
        setenv("LAZYX_CPU_NO_GEMM_VIEWS", "1", 1);
      } else {
        unsetenv("LAZYX_CPU_NO_GEMM_VIEWS");
      }
      clear_program_cache();
      for (int r = 0; r < reps + 1; ++r) {
        auto t0 = Clock::now();
        Tensor c = q.matmul(k.transpose(-2, -1));
        mark_step();
        auto t1 = Clock::now();
        if (r >= 1) ms[off].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
    unsetenv("LAZYX_CPU_NO_GEMM_VIEWS");
    double v = median(ms[0]), c = median(ms[1]);
    std::printf(
        "batched_qkT_8x8x256x64 views %.2f ms copied %.2f ms ratio_copied_over_views %.2f\n", v, c,
        c / v);
  }
  {  // A linear layer's bias + relu: the loop that follows the GEMM in the GEMM's own output,
     // against the bare GEMM, alternating; the difference bounds what a fused epilogue can save.
    Tensor x = rand({256, 784}), w = rand({512, 784}), b = rand({512});
    mark_step();
    std::vector<double> ms[2];
    for (int round = 0; round < 6; ++round) {
      const int epi = round % 2;
      for (int r = 0; r < reps + 1; ++r) {
        auto t0 = Clock::now();
        Tensor y = epi ? (x.matmul(w.t()) + b).relu() : x.matmul(w.t());
        mark_step();
        auto t1 = Clock::now();
        if (r >= 1) ms[epi].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
    double g = median(ms[0]), e = median(ms[1]);
    std::printf("linear_256x784x512 gemm %.3f ms gemm_bias_relu %.3f ms ratio_epilogue_over_gemm %.3f\n",
                g, e, e / g);
  }
  Tensor x = rand({1000});
  mark_step();
  for (int nodes : {100, 1000}) {
    std::vector<double> ms;
    for (int r = 0; r < 5; ++r) {
      Tensor y = random_graph(x, nodes, 1000u * nodes + r);
      sync({y});
      ms.push_back(last_step().compile_ms);
    }
    std::printf("compile_%d_nodes %.1f ms (median of 5 fresh graphs)\n", nodes, median(ms));
  }
  return 0;
}
