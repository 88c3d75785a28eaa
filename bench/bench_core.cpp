// Core engine overheads: tracing cost per op and a cached mark_step of a 1000-op graph.
// Prints one line per figure as "name value unit" so scripts can collect them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int ops = 1000;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  Tensor x0 = zeros({4, 4});
  mark_step();

  // Tracing: 1000 x `x = x + 1`, then drop the graph without running it.
  std::vector<double> trace_ns;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    Tensor x = x0;
    for (int i = 0; i < ops; ++i) x = x + 1;
    auto t1 = Clock::now();
    trace_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / ops);
    x = Tensor();
  }

  // Cached mark_step of the same 1000-op graph; the execute share is reported separately.
  std::vector<double> step_ms, exec_ms;
  Tensor keep;
  for (int r = 0; r < reps + 2; ++r) {
    Tensor x = x0;
    for (int i = 0; i < ops; ++i) x = x + 1;
    keep = x;
    auto t0 = Clock::now();
    mark_step();
    auto t1 = Clock::now();
    if (r >= 2) {  // skip the compile and the first cached run
      step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      exec_ms.push_back(last_step().execute_ms);
    }
    keep = Tensor();
  }
  std::printf("backend %s\n", backend_name().c_str());
  std::printf("trace_per_op %.1f ns\n", median(trace_ns));
  std::printf("cached_mark_step %.3f ms\n", median(step_ms));
  std::printf("cached_mark_step_execute %.3f ms\n", median(exec_ms));
  std::printf("cached_mark_step_overhead %.3f ms\n", median(step_ms) - median(exec_ms));
  return 0;
}
