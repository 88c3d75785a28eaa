// CPU backend math: (x.sin()*x + 0.5).tanh() * x.sigmoid() on 16 Mi float32 as a cached lazyx
// step in the default (fast) and precise math modes, each step followed by one hand-written loop
// (this file is compiled -O3 -march=native -ffast-math: glibc's vector math) on the same number
// of threads, first quiet, then with a busy process this benchmark starts itself. Threads:
// LAZYX_NUM_THREADS (read once per process). Prints "name value unit" lines and the ratios, of wall
// time and of the process's CPU time (which a machine shared with other jobs distorts less).
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    float s = std::tanh(std::sin(x[i]) * x[i] + 0.5f);
    y[i] = s * (1.0f / (1.0f + std::exp(-x[i])));
  }
}

static void use_mode(const char* mode) {
  setenv("LAZYX_CPU_MATH", mode, 1);
  set_backend("reference");
  set_backend("cpu");
}

// CPU time of the whole process (all threads, the busy child excluded), in ms.
static double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

struct Result {
  double lazy, hand, lazy_cpu, hand_cpu, maxrel;
};

// Alternates a lazyx step in `mode` with the hand loop, so both see the same load: medians.
static Result run(const char* mode, const Tensor& x, const std::vector<float>& host, int reps,
                  int threads) {
  const int64_t n = static_cast<int64_t>(host.size());
  use_mode(mode);
  std::vector<float> out(n);
  std::vector<double> lazy_ms, hand_ms, lazy_cpu, hand_cpu;
  Tensor y;
  for (int r = 0; r < reps + 2; ++r) {
    y = Tensor();
    const double c0 = cpu_ms();
    auto t0 = Clock::now();
    y = (x.sin() * x + 0.5).tanh() * x.sigmoid();
    mark_step();
    auto t1 = Clock::now();
    const double c1 = cpu_ms();
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) {
      ts.emplace_back(
          [&, t] { hand_loop(host.data(), out.data(), n * t / threads, n * (t + 1) / threads); });
    }
    hand_loop(host.data(), out.data(), 0, n / threads);
    for (auto& t : ts) t.join();
    auto t2 = Clock::now();
    const double c2 = cpu_ms();
    if (r < 2) continue;
    lazy_cpu.push_back(c1 - c0);
    hand_cpu.push_back(c2 - c1);
    lazy_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    hand_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  Result res{median(lazy_ms), median(hand_ms), median(lazy_cpu), median(hand_cpu), 0};
  std::vector<float> got = y.to_vector<float>();
  for (int64_t i = 0; i < n; i += 97) {
    double d = std::fabs(got[i] - out[i]) / std::max(std::fabs(out[i]), 1e-30f);
    res.maxrel = std::max(res.maxrel, d);
  }
  return res;
}

static void print(const char* load, const char* mode, const Result& r) {
  std::printf("%s lazyx_%s %.3f ms\n", load, mode, r.lazy);
  std::printf("%s hand_fast_math_loop %.3f ms\n", load, r.hand);
  std::printf("%s ratio_%s_over_hand %.2f x\n", load, mode, r.lazy / r.hand);
  std::printf("%s cpu_time_lazyx_%s %.3f ms\n", load, mode, r.lazy_cpu);
  std::printf("%s cpu_time_hand %.3f ms\n", load, r.hand_cpu);
  std::printf("%s cpu_ratio_%s_over_hand %.2f x\n", load, mode, r.lazy_cpu / r.hand_cpu);
  std::printf("%s max_rel_diff_%s_vs_hand %.2e\n", load, mode, r.maxrel);
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : int64_t{16} << 20;
  const int threads = num_threads();
  set_backend("cpu");
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>((i % 2000) * 0.005 - 5.0);
  Tensor x = tensor<float>(host, {n});
  mark_step();

  std::printf("threads %d elements %lld\n", threads, static_cast<long long>(n));
  for (const char* mode : {"fast", "precise"})
    print("quiet", mode, run(mode, x, host, reps, threads));
  bench::BusyProcess busy;
  Result loaded[2] = {run("fast", x, host, reps, threads), run("precise", x, host, reps, threads)};
  busy.stop();
  print("busy", "fast", loaded[0]);
  print("busy", "precise", loaded[1]);
  return 0;
}
