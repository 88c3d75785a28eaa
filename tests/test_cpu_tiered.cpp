// Tiered compilation on the cpu backend: new kernels run at the quick tier first, the background
// compiler replaces them with full-tier code, and both compute bitwise the same results.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

int64_t counter(const char* n) { return metrics::counter_value(n).value_or(0); }

// Raw bytes of every output, so that "equal" means bitwise.
using Bytes = std::vector<std::vector<char>>;

Bytes bytes_of(const std::vector<Tensor>& ts) {
  Bytes out;
  for (const Tensor& t : ts) {
    std::vector<char> b(static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
    t.copy_to_host(b.data());
    out.push_back(std::move(b));
  }
  return out;
}

// Kernels of many kinds: math functions in both float widths and bfloat16, row and column
// reductions, normalizations, random numbers, a transposed read, broadcasting, and kernels whose
// results the optimizer cannot change (compiled at the quick tier without O3).
Bytes run_step(int seed) {
  manual_seed(static_cast<uint64_t>(seed));
  Tensor x = randn({64, 96});
  Tensor d = randn({33, 17}, kFloat64);
  Tensor h = randn({40, 24}).to(kBFloat16);
  Tensor big = randn({512, 300});  // enough elements to be vectorized at the quick tier
  // Special values, 40 of them: NaN, infinities, signed zeros, out-of-range for integer casts.
  std::vector<float> sv;
  for (int i = 0; i < 40; ++i) {
    const float v[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3e10f, -3e10f, 255.5f, -1.5f, 7.25f};
    sv.push_back(v[i % 10] * (i < 20 ? 1.0f : -1.0f));
  }
  Tensor sp = tensor(sv, {4, 10});
  mark_step();
  std::vector<Tensor> outs = {
      (x.sin() * x + 0.5).tanh() * x.sigmoid(),
      x.gelu().exp().sum({1}),
      x.softmax(1),
      x.log_softmax(0),
      x.logsumexp({0}),
      x.transpose(0, 1).mul(x.amax({1})).mean({0}),
      (d.exp() + d.cos()).sum(),
      d.sqrt().abs().pow(1.5),
      h.tanh().mul(h).sum({0}),
      rand({50, 7}) + x.narrow(0, 0, 50).narrow(1, 0, 7),
      // Order-exact kernels (the quick pipeline): plain sums of every shape, integer math,
      // an optimizer-like update, clamps.
      (x * 3 - 1).sum({1}),
      x.mean({0}),
      (x * x).sum(),
      d.sum({1}),
      h.mul(h).sum({1}),
      (x.abs() + 1e-8).sqrt().div((x * x).add(0.5)).mul(-0.01).add(x),
      floor(x.clamp(-0.5, 0.5).mul(2)),
      remainder(x.mul(100).to(kInt64), 7).sum({1}),
      sp.to(kInt64),
      sp.to(kInt32),
      sp.to(kUInt8),
      sp.to(kBFloat16),
      sp.to(kFloat16),
      sp * 0,
      sp.clamp(-1, 1),
      sp.sum({1}),
      sp.add(1).mean({0}),
      sp.div(sp),
      (big * 3 - 1).sum({1}),
      (big.abs() + 1).sqrt().mul(big).sum({0}),
  };
  sync(outs);
  return bytes_of(outs);
}

class Tiered : public ::testing::Test {
 protected:
  void SetUp() override {
    set_backend("cpu");
    setenv("LAZYX_CACHE_DIR", "", 1);  // compile everything here, in this process
    unsetenv("LAZYX_CPU_TIERED");
    clear_program_cache();
    metrics::clear_counters();
  }
  void TearDown() override {
    wait_for_background_compiles();
    unsetenv("LAZYX_CPU_TIERED");
    unsetenv("LAZYX_CPU_NO_BATCHING");
  }
};

}  // namespace

TEST_F(Tiered, FullTierReplacesQuickKernelsWithBitwiseEqualResults) {
  const Bytes quick = run_step(7);
  ASSERT_GT(counter("CpuKernelCompiled"), 5);
  // Both quick pipelines ran: O3 for kernels with library math or fast-math flags, the quick
  // one for the rest.
  EXPECT_GE(counter("CpuKernelQuickPipeline"), 5);
  EXPECT_LT(counter("CpuKernelQuickPipeline"), counter("CpuKernelCompiled"));
  wait_for_background_compiles();
  const Bytes full = run_step(7);  // the same programs: cache hits that swap the code in
  EXPECT_EQ(counter("CpuKernelUpgraded"), counter("CpuKernelCompiled"));
  ASSERT_EQ(quick.size(), full.size());
  for (size_t i = 0; i < quick.size(); ++i) EXPECT_TRUE(quick[i] == full[i]) << "output " << i;
}

TEST_F(Tiered, OffCompilesFullTierAtOnceWithTheSameResults) {
  const Bytes tiered = run_step(11);
  wait_for_background_compiles();
  clear_program_cache();  // frees every kernel: the next programs compile again
  metrics::clear_counters();
  setenv("LAZYX_CPU_TIERED", "0", 1);
  const Bytes direct = run_step(11);
  EXPECT_GT(counter("CpuKernelCompiled"), 5);
  wait_for_background_compiles();
  run_step(11);
  EXPECT_EQ(counter("CpuKernelUpgraded"), 0);
  EXPECT_TRUE(tiered == direct);
}

// A compile thread's quick-tier kernels go through LLVM as one module; compiled one module each
// (LAZYX_CPU_NO_BATCHING=1, a benchmark baseline) they compute bitwise the same.
TEST_F(Tiered, BatchedQuickKernelsMatchKernelsCompiledAlone) {
  const Bytes batched = run_step(13);
  ASSERT_GT(counter("CpuKernelCompiled"), 5);
  wait_for_background_compiles();
  clear_program_cache();
  setenv("LAZYX_CPU_NO_BATCHING", "1", 1);
  const Bytes alone = run_step(13);
  EXPECT_TRUE(batched == alone);
  setenv("LAZYX_CPU_NO_BATCHING", "maybe", 1);  // invalid: an error, not ignored
  clear_program_cache();
  EXPECT_THROW(run_step(13), Error);
}

TEST_F(Tiered, InvalidSettingIsAnError) {
  Tensor x = full({5}, 2.0f);
  mark_step();
  setenv("LAZYX_CPU_TIERED", "sometimes", 1);
  Tensor y = (x * 3 + 1).exp();
  try {
    sync({y});
    ADD_FAILURE() << "expected lazyx::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LAZYX_CPU_TIERED"), std::string::npos) << e.what();
  }
  unsetenv("LAZYX_CPU_TIERED");
  sync({y});
  EXPECT_FLOAT_EQ(y.to_vector<float>()[4], std::exp(7.0f));
}
