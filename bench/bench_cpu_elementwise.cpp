// CPU backend: ((x*2+1).relu()*3 - x).exp() on 16 Mi float32 as a cached lazyx step, against
// one hand-written fused loop (this file is compiled -O3 -march=native -ffast-math) on the same
// number of threads. Prints "name value unit" lines and the ratio.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using bench::median;
using bench::num_threads;
using Clock = std::chrono::steady_clock;

__attribute__((noinline)) static void hand_loop(const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    float t = x[i] * 2.0f + 1.0f;
    t = t > 0.0f ? t : 0.0f;
    y[i] = std::exp(t * 3.0f - x[i]);
  }
}

int main(int argc, char** argv) {
  const int64_t n = int64_t{16} << 20;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = num_threads();
  set_backend("cpu");

  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>((i % 1000) * 0.001 - 0.5);
  Tensor x = tensor<float>(host, {n});
  mark_step();

  std::vector<double> lazy_ms;
  Tensor y;
  for (int r = 0; r < reps + 2; ++r) {
    y = Tensor();
    auto t0 = Clock::now();
    y = ((x * 2 + 1).relu() * 3 - x).exp();
    mark_step();
    auto t1 = Clock::now();
    if (r >= 2) lazy_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::vector<float> got = y.to_vector<float>();

  std::vector<float> out(n);
  std::vector<double> hand_ms;
  for (int r = 0; r < reps + 2; ++r) {
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) {
      ts.emplace_back([&, t] { hand_loop(host.data(), out.data(), n * t / threads, n * (t + 1) / threads); });
    }
    hand_loop(host.data(), out.data(), 0, n / threads);
    for (auto& t : ts) t.join();
    auto t1 = Clock::now();
    if (r >= 2) hand_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  double maxrel = 0;
  for (int64_t i = 0; i < n; i += 997) {
    maxrel = std::max(maxrel, static_cast<double>(std::fabs(got[i] - out[i]) / std::fabs(out[i])));
  }
  double l = median(lazy_ms), h = median(hand_ms);
  std::printf("threads %d\n", threads);
  std::printf("lazyx_cached_step %.3f ms\n", l);
  std::printf("hand_fused_loop %.3f ms\n", h);
  std::printf("ratio_lazyx_over_hand %.2f x\n", l / h);
  std::printf("max_rel_diff %.2e\n", maxrel);
  return 0;
}
