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

INSTANTIATE_TEST_SUITE_P(Backends, Memory, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
