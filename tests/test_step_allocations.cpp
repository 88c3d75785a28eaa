// A cached step on the cpu backend allocates almost nothing: its report, donation and run lists,
// the mark_step target list, IR node blocks, and the parameter and scalar nodes of the last step
// are reused. What is left is one block per traced op (the new node's shape). Counted by replacing
// operator new in this binary. (The reference backend is the oracle, not a fast path: its
// interpreter allocates per instruction.)
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "test_util.h"

namespace {
std::atomic<int64_t> allocations{0};
}  // namespace

#if !defined(__SANITIZE_ADDRESS__)  // the sanitizer's own operator new must stay in place
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

namespace lazyx {
namespace {

// Allocations per step of `step`, over 200 steps after a warm-up.
template <class F>
double allocations_per_step(F step) {
  for (int i = 0; i < 30; ++i) step();
  wait_for_background_compiles();
  for (int i = 0; i < 30; ++i) step();  // the full tier swapped in, its lists grown
  const int64_t before = allocations.load();
  for (int i = 0; i < 200; ++i) step();
  const double per_step = static_cast<double>(allocations.load() - before) / 200.0;
  std::printf("allocations per step: %.2f\n", per_step);
  return per_step;
}

// At most this many blocks per traced op, and this many per sync.
constexpr double kPerOp = 1, kPerSync = 2;

class StepAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "counts operator new, which the address sanitizer replaces";
#endif
    set_backend("cpu");
    mark_step();
  }
};

// x.add_(1); mark_step(): the add node's shape is the only block left (x's parameter node and
// the scalar node are the last step's, reused).
TEST_F(StepAllocations, CachedSingleOpStep) {
  Tensor x = testing::materialized(testing::iota(1024), {1024});
  const double per_step = allocations_per_step([&] {
    x.add_(1);
    mark_step();
  });
  EXPECT_LE(per_step, kPerOp + kPerSync);
  EXPECT_FLOAT_EQ(x.to_vector<float>()[5], 5.0f + 260.0f);
}

// An optimizer-like step over 16 tensors: allocations grow with the ops traced, not with
// anything per sync.
TEST_F(StepAllocations, SixteenTensorUpdate) {
  std::vector<Tensor> p, g;
  for (int i = 0; i < 16; ++i) {
    p.push_back(testing::materialized(testing::iota(256, static_cast<float>(i)), {16, 16}));
    g.push_back(testing::materialized(testing::iota(256, 1.0f, 0.0f), {16, 16}));
  }
  const double per_step = allocations_per_step([&] {
    for (int i = 0; i < 16; ++i) p[i].add_(g[i], -0.5);
    mark_step();
  });
  EXPECT_LE(per_step, 16 * kPerOp + kPerSync);
  EXPECT_FLOAT_EQ(p[3].to_vector<float>()[7], 3.0f + 7.0f - 0.5f * 260.0f);
}

}  // namespace
}  // namespace lazyx
