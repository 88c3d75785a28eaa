// The fixed cost of a cached step on the cpu backend: `x.add_(1); mark_step()` on a donated
// 1024-float tensor (trace one op, hash, cache lookup, donation, launch, commit), against the
// same update as a hand loop and a cached step of 16 x 1024 floats (the work it adds).
// Quiet, then beside a busy process it starts itself.
//   bench_fixed_cost [steps]   prints "load name value unit" lines.
//   bench_fixed_cost steps --cached-only   runs only the 1K cached steps (one round, quiet), for
//   counting instructions (bench/run_fixed_cost_instructions.sh).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using Clock = std::chrono::steady_clock;

__attribute__((noinline)) static void hand_add(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += 1.0f;
}

// Median microseconds per step over `rounds` batches of `steps` cached steps.
static double step_us(int64_t n, int steps, int rounds) {
  Tensor x = full({n}, 0.0f);
  mark_step();
  for (int i = 0; i < 20; ++i) {  // warm-up: compile, then the full tier replaces the quick one
    x.add_(1);
    mark_step();
  }
  wait_for_background_compiles();
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) {
      x.add_(1);
      mark_step();
    }
    per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps);
  }
  const float want = static_cast<float>(20 + steps * rounds);
  if (x.to_vector<float>()[n - 1] != want) {
    std::fprintf(stderr, "bench_fixed_cost: wrong result\n");
    std::exit(1);
  }
  return bench::median(per);
}

struct Row {
  double small, big, hand;
};

static Row measure(int steps) {
  Row r;
  r.small = step_us(1024, steps, 7);
  r.big = step_us(16 * 1024, steps / 4, 7);
  std::vector<float> h(1024, 0.0f);
  std::vector<double> hand;
  for (int k = 0; k < 7; ++k) {
    auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) hand_add(h.data(), 1024);
    hand.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps);
  }
  r.hand = bench::median(hand);
  if (h[0] <= 0) std::exit(1);
  return r;
}

static void print(const char* load, const Row& r) {
  std::printf("%s cached_step_1k %.3f us\n", load, r.small);
  std::printf("%s cached_step_16k %.3f us\n", load, r.big);
  std::printf("%s hand_loop_1k %.3f us\n", load, r.hand);
  std::printf("%s fixed_cost_per_step %.3f us\n", load, r.small - r.hand);
  std::printf("%s ratio_step_over_hand_1k %.1f x\n", load, r.small / r.hand);
}

// Quiet first, then beside a busy process the benchmark starts itself.
int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (steps < 4) {
    std::fprintf(stderr, "bench_fixed_cost: steps must be at least 4, not '%s'\n", argv[1]);
    return 2;
  }
  set_backend("cpu");
  if (argc > 2 && std::string(argv[2]) == "--cached-only") {
    std::printf("cached_step_1k %.3f us\n", step_us(1024, steps, 1));
    return 0;
  }
  std::printf("threads %d\n", bench::num_threads());
  print("quiet", measure(steps));
  bench::BusyProcess busy;
  const Row loaded = measure(steps);
  busy.stop();
  print("busy", loaded);
  return 0;
}
