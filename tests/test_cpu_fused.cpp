// The cpu backend's fused loops and donation: randomly generated elementwise graphs (with
// broadcasts, casts, views and several outputs) against the reference backend, in-place updates
// whose donated buffer is read at other indices (rule 6 of ALIASING.md), and compiled loops
// shared by the programs that generate them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

bool close(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    if (!close(got[i], want[i], tol)) {
      ADD_FAILURE() << what << " at " << i << ": cpu " << got[i] << " reference " << want[i];
      bad++;
    }
  }
}

// A random elementwise graph over inputs of shapes {R, C}, {C}, {R, 1} and a transposed view.
// Values stay bounded (tanh, sigmoid, clamps) so float32 differences stay small.
std::vector<Tensor> random_graph(uint32_t seed, int64_t R, int64_t C, Dtype dt) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  auto host = [&](int64_t n) {
    std::vector<double> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  std::vector<Tensor> vals = {tensor<double>(host(R * C), {R, C}).to(dt),
                              tensor<double>(host(C), {C}).to(dt),
                              tensor<double>(host(R), {R, 1}).to(dt),
                              tensor<double>(host(R * C), {C, R}).to(dt).t()};
  int nodes = 5 + static_cast<int>(rng() % 40);
  for (int i = 0; i < nodes; ++i) {
    const Tensor& a = vals[rng() % vals.size()];
    const Tensor& b = vals[rng() % vals.size()];
    Tensor r;
    switch (rng() % 16) {
      case 0: r = a + b; break;
      case 1: r = a - b * 0.5; break;
      case 2: r = a * b; break;
      case 3: r = a / (b.abs() + 1); break;
      case 4: r = a.tanh(); break;
      case 5: r = a.sigmoid(); break;
      case 6: r = a.relu() - 0.25; break;
      case 7: r = a.maximum(b); break;
      case 8: r = where(a.gt(b), a, b * 2); break;
      case 9: r = (a.clamp(-3, 3)).exp(); break;
      case 10: r = (a.abs() + 0.5).log(); break;
      case 11: r = a.to(kFloat64).sin().to(dt); break;
      case 12: r = a.gelu(); break;
      case 13: r = a.add(b, -0.3); break;
      case 14: r = (a * 3).to(kInt32).to(dt) * 0.5; break;
      default: r = a.mul(b).clamp(-4, 4); break;
    }
    vals.push_back(r);
  }
  // Several outputs, including an intermediate that is also read later.
  return {vals.back(), vals[vals.size() / 2 + 2], vals[vals.size() - 2]};
}

}  // namespace

TEST(CpuFused, RandomGraphsMatchReference) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 5}, {1, 1}, {17, 131}, {64, 300}, {0, 7}};
  int cases = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    auto [R, C] = shapes[seed % shapes.size()];
    Dtype dt = seed % 4 == 0 ? kFloat64 : (seed % 7 == 0 ? kBFloat16 : kFloat32);
    double tol = dt == kFloat64 ? 1e-10 : (dt == kBFloat16 ? 5e-2 : 5e-4);
    set_backend("reference");
    std::vector<Tensor> r = random_graph(seed, R, C, dt);
    sync(r);
    std::vector<std::vector<double>> want;
    for (auto& t : r) want.push_back(t.to_vector<double>());
    set_backend("cpu");
    std::vector<Tensor> c = random_graph(seed, R, C, dt);
    sync(c);
    for (size_t k = 0; k < c.size(); ++k) {
      expect_same(c[k].to_vector<double>(), want[k], tol,
                  "seed " + std::to_string(seed) + " output " + std::to_string(k));
    }
    cases++;
  }
  EXPECT_EQ(cases, 40);
}

TEST(CpuFused, LargeParallelLoopMatchesReference) {
  // Large enough to split across the thread pool, with a broadcast row operand.
  const int64_t R = 300, C = 1001;
  auto build = [&] {
    manual_seed(3);
    Tensor x = rand({R, C});
    Tensor b = randn({C});
    return (((x * 2 + 1).relu() * 3 - x).exp() + b).tanh();
  };
  set_backend("reference");
  std::vector<double> want = build().to_vector<double>();
  set_backend("cpu");
  expect_same(build().to_vector<double>(), want, 1e-5, "large");
}

TEST(CpuFused, DonatedBufferReadAtOtherIndices) {
  // w += w.t(): the donated buffer is read transposed while it is written, so the fused loop
  // must go through a temporary; w += w[::-1]-like reads and a later reader of old w too.
  for (const char* be : {"reference", "cpu"}) {
    set_backend(be);
  }
  auto run = [](const char* be) {
    set_backend(be);
    const int64_t n = 67;
    std::vector<float> h(n * n);
    for (int64_t i = 0; i < n * n; ++i) h[i] = static_cast<float>(i % 101) * 0.01f;
    Tensor w = tensor<float>(h, {n, n});
    Tensor v = tensor<float>(std::vector<float>(h.begin(), h.begin() + n), {n});
    mark_step();
    w.add_(w.t());
    v.mul_(v.slice(0, 0, 1));  // broadcast read of the donated buffer's first element
    mark_step();
    int64_t donated = last_step().num_donated;
    w.add_(1.0);
    Tensor old_sum = w.sum();  // reads the new w; w itself is then updated again
    w.mul_(2.0);
    mark_step();
    std::vector<double> r = w.to_vector<double>();
    std::vector<double> rv = v.to_vector<double>();
    r.insert(r.end(), rv.begin(), rv.end());
    r.push_back(old_sum.item<double>());
    r.push_back(static_cast<double>(donated));
    return r;
  };
  std::vector<double> want = run("reference");
  std::vector<double> got = run("cpu");
  expect_same(got, want, 1e-5, "donated");
}

TEST(CpuFused, ChainOfInPlaceOpsDonates) {
  set_backend("cpu");
  Tensor x = tensor<float>({1, 2, 3, 4, 5}, {5});
  mark_step();
  x += 1;
  x *= 3;
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(last_step().bytes_allocated, 0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{6, 9, 12, 15, 18}));
}

// The memory bound (100 donated steps on 64 MiB) runs on every backend in test_memory.cpp.

TEST(CpuFused, ThreadPoolSizeFromEnvironment) {
  // The pool is sized once per process; LAZYX_NUM_THREADS=1 must still give correct results
  // (the ctest run uses the default, all cores).
  set_backend("cpu");
  Tensor x = full({100000}, 2.0);
  EXPECT_NEAR((x * x).sum().item<float>(), 400000.0f, 1.0f);
}

TEST(CpuFused, ReductionsOfRandomGraphsMatchReference) {
  // Reductions fuse their elementwise producers; other outputs of the same loop are stored too.
  for (uint32_t seed = 100; seed < 112; ++seed) {
    int64_t R = 1 + seed % 5 * 7, C = 3 + seed % 3 * 50;
    auto build = [&] {
      std::vector<Tensor> v = random_graph(seed, R, C, kFloat32);
      return std::vector<Tensor>{v[0].sum({-1}), v[1].mean({0}, true), v[2].amax(),
                                 v[2].amin({-1}), v[1]};
    };
    set_backend("reference");
    std::vector<Tensor> r = build();
    sync(r);
    std::vector<std::vector<double>> want;
    for (auto& t : r) want.push_back(t.to_vector<double>());
    set_backend("cpu");
    std::vector<Tensor> c = build();
    sync(c);
    for (size_t k = 0; k < c.size(); ++k) {
      expect_same(c[k].to_vector<double>(), want[k], 1e-4,
                  "seed " + std::to_string(seed) + " reduction " + std::to_string(k));
    }
  }
}

TEST(CpuFused, KernelsAreSharedAcrossPrograms) {
  // Programs that generate the same loop share its compiled code; each passes its own scalars,
  // even where the loop's scalars sit at other slots of the program.
  // Counts what LLVM compiles in this process: the persistent compile cache is off.
  setenv("LAZYX_CACHE_DIR", "", 1);
  set_backend("cpu");
  clear_program_cache();
  metrics::clear_counters();
  auto counter = [](const char* n) { return metrics::counter_value(n).value_or(0); };
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {6});
  Tensor w = tensor<float>({1, 1, 1}, {3});
  mark_step();
  Tensor a = (x * 3 + 1).tanh();
  sync({a});
  const int64_t compiled = counter("CpuKernelCompiled");
  EXPECT_GE(compiled, 1);
  EXPECT_EQ(counter("CpuKernelReused"), 0);
  // Another program: an unrelated loop over w first, then the same loop as `a` with new scalars.
  Tensor v = (w - 4).exp() * 2;
  Tensor b = (x * 0.5 + -2).tanh();
  sync({v, b});
  EXPECT_GE(counter("CpuKernelReused"), 1);
  std::vector<float> got_a = a.to_vector<float>(), got_b = b.to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(got_a[i], std::tanh((i + 1) * 3.0f + 1), 1e-6) << i;
    EXPECT_NEAR(got_b[i], std::tanh((i + 1) * 0.5f - 2), 1e-6) << i;
  }
  for (float e : v.to_vector<float>()) EXPECT_NEAR(e, std::exp(-3.0f) * 2, 1e-6);
  // The code goes with the last program that uses it: after the cache is cleared the same loop
  // compiles again and still computes the right values.
  clear_program_cache();
  const int64_t before = counter("CpuKernelCompiled");
  Tensor c = (x * 3 + 1).tanh();
  sync({c});
  EXPECT_GT(counter("CpuKernelCompiled"), before);
  EXPECT_EQ(c.to_vector<float>(), got_a);
  EXPECT_EQ(counter("PersistentCacheHit") + counter("PersistentCacheMiss"), 0);
}
