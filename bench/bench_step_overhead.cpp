// Engine time of a cached step that updates n tensors in place (p.add_(g, -0.5)): tracing, and
// mark_step minus the program's execution, per tensor, for n = 100 .. 10,000. CPU time (this
// thread's) is printed too: on a loaded machine wall time also counts time spent descheduled.
//   bench_step_overhead [--backend NAME] [--threads N] [--busy] [--reps R] [n ...]
// --busy starts a competing busy process for the duration of the run.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// This thread's CPU time: on a shared machine wall time also counts time spent descheduled.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void run(int64_t n, int reps) {
  std::vector<Tensor> p, g;
  for (int64_t i = 0; i < n; ++i) {
    p.push_back(full({16}, 1.0f));
    g.push_back(full({16}, 0.25f));
  }
  mark_step();
  std::vector<double> trace_us, trace_cpu_us, engine_us, engine_cpu_us;
  double first_compile_ms = 0;
  for (int r = 0; r < reps + 2; ++r) {
    auto t0 = Clock::now();
    double c0 = cpu_us();
    for (int64_t i = 0; i < n; ++i) p[i].add_(g[i], -0.5);
    double trace = us_since(t0);
    double trace_cpu = cpu_us() - c0;
    auto t1 = Clock::now();
    double c1 = cpu_us();
    mark_step();
    double step = us_since(t1);
    double step_cpu = cpu_us() - c1;
    StepReport rep = last_step();
    if (r == 0) first_compile_ms = rep.compile_ms;
    if (r < 2) continue;  // the first step compiles; the second checks the cache
    if (!rep.cache_hit) {
      std::fprintf(stderr, "n=%lld: step %d missed the program cache\n", (long long)n, r);
      std::exit(1);
    }
    trace_us.push_back(trace / n);
    trace_cpu_us.push_back(trace_cpu / n);
    engine_us.push_back((step - rep.execute_ms * 1e3) / n);
    engine_cpu_us.push_back(step_cpu / n);  // includes execution: an upper bound
  }
  float want = 1.0f - 0.125f * static_cast<float>(reps + 2);
  if (p[n - 1].to_vector<float>()[0] != want) {
    std::fprintf(stderr, "n=%lld: wrong result\n", (long long)n);
    std::exit(1);
  }
  std::printf(
      "%-9s n=%-6lld us/tensor: trace %.2f wall %.2f cpu; step minus execute %.2f wall; "
      "whole step %.2f cpu; compile %.0f ms\n",
      backend_name().c_str(), (long long)n, median(trace_us), median(trace_cpu_us),
      median(engine_us), median(engine_cpu_us), first_compile_ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes;
  int reps = 5;
  bool busy = false;
  std::string backend;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--backend" && a + 1 < argc) {
      backend = argv[++a];
    } else if (s == "--threads" && a + 1 < argc) {
      setenv("LAZYX_NUM_THREADS", argv[++a], 1);
    } else if (s == "--busy") {
      busy = true;
    } else if (s == "--reps" && a + 1 < argc) {
      reps = std::atoi(argv[++a]);
    } else if (!s.empty() && s[0] != '-') {
      sizes.push_back(std::atoll(s.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (sizes.empty()) sizes = {100, 300, 1000, 3000, 10000};
  if (!backend.empty()) set_backend(backend);  // after --threads: the pool starts here
  std::unique_ptr<bench::BusyProcess> load;
  if (busy) load = std::make_unique<bench::BusyProcess>();
  for (int64_t n : sizes) run(n, reps);
  return 0;
}
