// Several in-place updates of one donated tensor in one step (through views and elementwise)
// run in its buffer, in order, without a full-size scratch copy, on the reference backend.
#include "test_util.h"

namespace lazyx {
namespace {

constexpr int64_t kR = 4096, kC = 1024;  // 16 MiB of float32

// Runs `update` on a donated table as one step; checks the peak stays within 10 % of the
// live set and that the result matches the same updates on host values.
template <typename F, typename H>
void expect_in_place(F update, H host_update) {
  set_backend("reference");
  std::vector<float> host(kR * kC);
  for (int64_t i = 0; i < kR * kC; ++i) host[i] = static_cast<float>(i % 97);
  Tensor table = tensor<float>(host, {kR, kC});
  mark_step();
  update(table);  // warm-up: compile, fill the allocator's cache
  mark_step();
  host_update(host);
  const double live = static_cast<double>(memory_stats().bytes_in_use);
  reset_peak_memory_stats();
  update(table);
  mark_step();
  host_update(host);
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(last_step().bytes_allocated, 0);
  EXPECT_LT(static_cast<double>(memory_stats().peak_bytes), 1.1 * live)
      << memory_stats().to_string();
  std::vector<float> got = table.to_vector<float>();
  ASSERT_EQ(got.size(), host.size());
  for (size_t i = 0; i < host.size(); i += 37) ASSERT_FLOAT_EQ(got[i], host[i]) << "at " << i;
}

void host_rows(std::vector<float>& h, int64_t r0, int64_t n, float mul, float add) {
  for (int64_t i = r0 * kC; i < (r0 + n) * kC; ++i) h[i] = h[i] * mul + add;
}

TEST(InPlaceChains, TwoSliceUpdates) {
  expect_in_place(
      [](Tensor& t) {
        t.narrow(0, 0, 100).add_(1);
        t.narrow(0, 50, 100).add_(2);
      },
      [](std::vector<float>& h) {
        host_rows(h, 0, 100, 1, 1);
        host_rows(h, 50, 100, 1, 2);
      });
}

TEST(InPlaceChains, FullUpdateThenViewsThenFill) {
  expect_in_place(
      [](Tensor& t) {
        t.mul_(0.5);
        t.narrow(0, 10, 20).add_(t.narrow(0, 40, 20));
        t.narrow(1, 3, 1).fill_(7);
        t.add_(1);
      },
      [](std::vector<float>& h) {
        host_rows(h, 0, kR, 0.5f, 0);
        for (int64_t i = 10 * kC; i < 30 * kC; ++i) h[i] += h[i + 30 * kC];
        for (int64_t r = 0; r < kR; ++r) h[r * kC + 3] = 7;
        host_rows(h, 0, kR, 1, 1);
      });
}

// An update that can fail on a bad index after a full update: the full update cannot run in the
// donated buffer (a failed step must change nothing), so the step reports the copy and its size.
TEST(InPlaceChains, ForcedCopyIsReportedAndCounted) {
  set_backend("reference");
  Tensor table = full({kR, kC}, 1.0f);
  Tensor idx = tensor<int64_t>({3, 7}, {2});
  Tensor src = full({2, kC}, 5.0f);
  mark_step();
  table.mul_(0.5);
  table.index_copy_(0, idx, src);
  mark_step();
  const StepReport r = last_step();
  EXPECT_EQ(r.num_donated, 1);
  EXPECT_NE(r.scratch_reason.find("can fail"), std::string::npos) << r.scratch_reason;
  EXPECT_GE(r.scratch_bytes, kR * kC * 4) << r.to_string();
  EXPECT_NE(r.to_string().find("scratch copy:"), std::string::npos);
  EXPECT_EQ(table.select(0, 3).to_vector<float>()[0], 5.0f);
  EXPECT_EQ(table.select(0, 4).to_vector<float>()[0], 0.5f);
  // A chain that runs in place reports no copy.
  table.narrow(0, 0, 10).add_(1);
  table.narrow(0, 5, 10).add_(1);
  mark_step();
  EXPECT_EQ(last_step().scratch_reason, "");
  EXPECT_LT(last_step().scratch_bytes, kR * kC * 4 / 10) << last_step().to_string();
}

}  // namespace
}  // namespace lazyx
