// Donation is physical (rule 5): an in-place training loop needs no second copy of its state.
#include "test_util.h"

namespace lazyx {
namespace {

class Memory : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    mark_step();
  }
};

TEST_P(Memory, HundredSgdStepsStayUnderBound) {
  const int64_t n = (64 << 20) / 4;  // 64 MiB of float32
  Tensor w = full({n}, 1.0);
  Tensor g = full({n}, 0.5);
  mark_step();
  // Warm-up: compile the step and fill the allocator's cache.
  w.add_(g, -0.1);
  mark_step();
  MemoryStats before = memory_stats();
  const double live = static_cast<double>(before.bytes_in_use);
  EXPECT_GE(live, 2.0 * (64 << 20));
  reset_peak_memory_stats();
  for (int step = 0; step < 100; ++step) {
    w.add_(g, -0.1);
    mark_step();
    ASSERT_EQ(last_step().num_donated, 1) << "step " << step;
    ASSERT_EQ(last_step().bytes_allocated, 0) << "step " << step;
  }
  MemoryStats after = memory_stats();
  EXPECT_LT(static_cast<double>(after.peak_bytes), 1.1 * live) << after.to_string();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  // 1 - 101 * 0.1 * 0.5, in float32 steps
  float expect = 1.0f;
  for (int i = 0; i < 101; ++i) expect = static_cast<float>(expect + (-0.1) * 0.5f);
  std::vector<float> v = w.slice(0, 0, 4).to_vector<float>();
  for (float x : v) EXPECT_NEAR(x, expect, 1e-4);
  EXPECT_NEAR(w.select(0, n - 1).item<float>(), expect, 1e-4);
}

TEST_P(Memory, WithoutDonationEachStepAllocates) {
  const int64_t n = (4 << 20) / 4;
  Tensor w = full({n}, 1.0);
  Tensor g = full({n}, 0.5);
  mark_step();
  setenv("LAZYX_ENABLE_PARAM_ALIASING", "0", 1);
  w.add_(g, -0.1);
  mark_step();
  unsetenv("LAZYX_ENABLE_PARAM_ALIASING");
  EXPECT_EQ(last_step().num_donated, 0);
  EXPECT_EQ(last_step().bytes_allocated, 4 << 20);
}

TEST_P(Memory, CachingAllocatorReusesBlocks) {
  const int64_t n = (8 << 20) / 4;
  { Tensor a = full({n}, 1.0); mark_step(); }
  int64_t fresh = memory_stats().num_fresh_allocs;
  for (int i = 0; i < 5; ++i) {
    Tensor a = full({n}, 2.0);
    mark_step();
  }
  EXPECT_EQ(memory_stats().num_fresh_allocs, fresh);  // every block came from the cache
}

// The cache keeps what recent steps needed: a one-off pass with large intermediates (an eval
// pass) does not leave its blocks cached once a few training steps have run without them.
TEST_P(Memory, LargeOneOffPassIsReleasedAfterSteps) {
  unsetenv("LAZYX_CACHE_LIMIT");
  manual_seed(1);
  Tensor w = randn({256, 256});
  Tensor x = randn({64, 256});
  mark_step();
  auto train = [&] {
    Tensor g = x.t().matmul(x.matmul(w).tanh()) * 1e-4;
    w.sub_(g);
    mark_step();
  };
  for (int i = 0; i < 5; ++i) train();
  empty_cache();
  reset_peak_memory_stats();
  for (int i = 0; i < 3; ++i) train();
  const double train_peak = static_cast<double>(memory_stats().peak_bytes);
  float eval_sum = 0;
  for (int i = 0; i < 3; ++i) {  // a one-off pass: 4096-row batches, reads only
    Tensor batch = randn({4096, 256});
    eval_sum += batch.matmul(w).tanh().abs().sum().item<float>();
  }
  EXPECT_GT(eval_sum, 0);
  MemoryStats after_eval = memory_stats();
  EXPECT_GT(static_cast<double>(after_eval.bytes_in_use + after_eval.bytes_cached), 2 * train_peak)
      << "the pass should have needed more than training: " << after_eval.to_string();
  for (int i = 0; i < 6; ++i) train();
  MemoryStats end = memory_stats();
  EXPECT_LE(static_cast<double>(end.bytes_in_use + end.bytes_cached), 1.25 * train_peak)
      << end.to_string() << " training peak " << train_peak;
  EXPECT_GT(end.num_trimmed_bytes, after_eval.num_trimmed_bytes);
}

TEST_P(Memory, CacheLimitSettingIsValidatedBeforeTheStep) {
  Tensor w = full({1024}, 1.0);
  mark_step();
  w.add_(1.0);
  setenv("LAZYX_CACHE_LIMIT", "lots", 1);
  testing::expect_error([] { mark_step(); }, {"LAZYX_CACHE_LIMIT", "lots"});
  EXPECT_TRUE(w.is_pending());  // the step did nothing
  setenv("LAZYX_CACHE_LIMIT", "0", 1);  // keep nothing cached after a step
  { Tensor t = w * 2; mark_step(); }
  mark_step();
  EXPECT_EQ(memory_stats().bytes_cached, 0);
  unsetenv("LAZYX_CACHE_LIMIT");
  EXPECT_FLOAT_EQ(w.select(0, 3).item<float>(), 2.0f);
}

INSTANTIATE_TEST_SUITE_P(Backends, Memory, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
