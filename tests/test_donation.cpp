// The donation rules of ALIASING.md, one by one, on every backend.
#include <cstdlib>

#include "test_util.h"

namespace lazyx {
namespace {

using testing::alias_accumulator;
using testing::alias_samples;
using testing::expect_error;
using testing::expect_floats;
using testing::materialized;

class Donation : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    mark_step();  // nothing pending from earlier tests
    metrics::clear_all();
  }
};


// The seed scenario, exactly as in ALIASING.md's worked example.
TEST_P(Donation, SeedScenarioDonatesOncePerStep) {
  std::vector<float> v = testing::iota(25, -1.0f, 0.1f);
  Tensor x = materialized(v, {5, 5});
  x += 1;
  x *= 3;
  mark_step();
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  int64_t b1 = r.params[0].buffer_id;
  EXPECT_TRUE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::InPlaceUpdate);
  // The detail line is written out when the report is read, with this step's numbers.
  EXPECT_EQ(r.params[0].detail, "alias source of tensor " + std::to_string(x.id()) +
                                    ", updated in place; output 0 reuses it");
  EXPECT_EQ(r.params[0].bytes, 100);
  EXPECT_EQ(r.num_donated, 1);
  EXPECT_EQ(r.bytes_allocated, 0);  // the output went into B1
  EXPECT_EQ(alias_samples(), 1);
  EXPECT_EQ(alias_accumulator(), 1);
  std::vector<float> want(25);
  for (int i = 0; i < 25; ++i) want[i] = (v[i] + 1) * 3;
  expect_floats(x, want);

  // A fresh chain from the new value, which lives in B1 again.
  x *= 1;
  mark_step();
  r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_EQ(r.params[0].buffer_id, b1);
  EXPECT_TRUE(r.params[0].donated);
  EXPECT_EQ(alias_samples(), 2);
  EXPECT_EQ(alias_accumulator(), 2);
  expect_floats(x, want);
}

TEST_P(Donation, SeedScenarioFromRandn) {
  manual_seed(7);
  Tensor x = randn({5, 5});
  mark_step();  // materializes x
  std::vector<float> v = x.to_vector<float>();
  x += 1;
  x *= 3;
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  std::vector<float> want(25);
  for (int i = 0; i < 25; ++i) want[i] = (v[i] + 1) * 3;
  expect_floats(x, want);
}

TEST_P(Donation, SeveralTensorsInOneStep) {
  Tensor a = materialized({1, 2, 3}, {3});
  Tensor b = materialized({4, 5, 6, 7}, {2, 2});
  Tensor c = materialized({8}, {1});
  Tensor g = materialized({1, 1, 1}, {3});
  a.add_(g, -0.5);
  b.mul_(2);
  c.sub_(1);
  mark_step();
  StepReport r = last_step();
  EXPECT_EQ(r.num_donated, 3);  // g is read but not updated: kept
  EXPECT_EQ(r.num_parameters, 4);
  int kept = 0;
  for (const auto& p : r.params) {
    if (!p.donated) {
      kept++;
      EXPECT_EQ(p.reason, AliasReason::NotUpdated);
    }
  }
  EXPECT_EQ(kept, 1);
  expect_floats(a, {0.5, 1.5, 2.5});
  expect_floats(b, {8, 10, 12, 14});
  expect_floats(c, {7});
  expect_floats(g, {1, 1, 1});
}

TEST_P(Donation, CloneBeforeInPlaceKeepsOldValue) {
  Tensor x = materialized({1, 2, 3, 4}, {4});
  Tensor y = x.clone();
  x.add_(10);
  mark_step();
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_FALSE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::Shared);
  EXPECT_EQ(r.params[0].detail,
            "also the value of a tensor this sync does not rewrite (1 other holder(s))");
  expect_floats(x, {11, 12, 13, 14});
  expect_floats(y, {1, 2, 3, 4});

  // Clone of a pending value; the original updated again in place.
  Tensor z = x.mul(2);
  Tensor w = z.clone();
  z.add_(1);
  mark_step();
  expect_floats(z, {23, 25, 27, 29});
  expect_floats(w, {22, 24, 26, 28});
  // Now x's buffer is held by x alone again: the next in-place update donates it.
  x.add_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  expect_floats(x, {12, 13, 14, 15});
  expect_floats(y, {1, 2, 3, 4});
}

TEST_P(Donation, ReaderOfOldValueInSameStep) {
  Tensor x = materialized({1, 2, 3, 4}, {2, 2});
  Tensor y = x * 2;      // reads the old value
  Tensor s = x.sum();    // a reduction of the old value
  Tensor m = x.matmul(x.t());
  x.add_(100);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  expect_floats(x, {101, 102, 103, 104});
  expect_floats(y, {2, 4, 6, 8});
  expect_floats(s, {10});
  expect_floats(m, {5, 11, 11, 25});
}

TEST_P(Donation, ReaderOfOldValueAfterTheUpdateInTraceOrder) {
  // The old value is read by a tensor created from a clone taken before; the update's node
  // comes first in the graph, so the program must order the write after the read (rule 6).
  Tensor x = materialized({1, 2, 3}, {3});
  Tensor old = x * 1;
  x.mul_(3);
  Tensor later = old + x;  // old + new
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  expect_floats(x, {3, 6, 9});
  expect_floats(later, {4, 8, 12});
  expect_floats(old, {1, 2, 3});
}

TEST_P(Donation, PartialSyncNeverDonatesThenStepDoes) {
  Tensor x = materialized({1, 2, 3}, {3});
  Tensor y = x * 2;
  x.add_(1);
  sync({x});
  StepReport r = last_step();
  EXPECT_EQ(r.kind, "sync");
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_FALSE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::PartialSync);
  EXPECT_TRUE(y.is_pending());
  EXPECT_FALSE(x.is_pending());
  x.mul_(2);
  mark_step();
  r = last_step();
  expect_floats(y, {2, 4, 6});  // still the value before both updates
  expect_floats(x, {4, 6, 8});
  // x's new chain started from the buffer the sync produced, and it was donated.
  bool donated_x = false;
  for (const auto& p : r.params) donated_x |= p.donated;
  EXPECT_TRUE(donated_x);

  // A value read is a partial sync too.
  x.add_(1);
  EXPECT_FLOAT_EQ(x.sum().item<float>(), 21);
  EXPECT_EQ(last_step().num_donated, 0);
}

TEST_P(Donation, CachedConstantIsNeverDonated) {
  Tensor s = scalar_tensor(2.5);
  s.add_(1);
  mark_step();
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_FALSE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::CachedConstant);
  EXPECT_FLOAT_EQ(s.item<float>(), 3.5f);
  EXPECT_FLOAT_EQ(scalar_tensor(2.5).item<float>(), 2.5f);  // the cache still holds 2.5
}

TEST_P(Donation, UserRequestedDonation) {
  Tensor t = materialized({1, 2, 3, 4}, {4});
  Tensor y = t * 2;
  EXPECT_FALSE(set_buffer_donation(y, true));  // pending: no buffer to donate
  EXPECT_TRUE(set_buffer_donation(t, true));
  EXPECT_TRUE(get_buffer_donation(t));
  EXPECT_FALSE(is_donated(t));
  mark_step();
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_TRUE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::UserRequested);
  EXPECT_EQ(r.bytes_allocated, 0);
  EXPECT_TRUE(is_donated(t));
  expect_floats(y, {2, 4, 6, 8});
  expect_error([&] { t.to_vector<float>(); }, {"[to_vector]", "donated"});
  expect_error([&] { (void)(t + 1); }, {"[add]", "donated"});
  EXPECT_FALSE(get_buffer_donation(y));  // the flag does not pass to outputs
}

TEST_P(Donation, UserDonationInPartialSyncRespectsOtherReaders) {
  Tensor t = materialized({1, 2, 3}, {3});
  Tensor y = t * 2;
  Tensor z = t + 1;  // also reads t, but is not part of the sync
  ASSERT_TRUE(set_buffer_donation(t, true));
  sync({y});
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_FALSE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::ReadElsewhere);
  EXPECT_FALSE(is_donated(t));
  expect_floats(y, {2, 4, 6});
  // Reading z is the next sync that reads t, and nothing else needs t now: z takes t's buffer.
  expect_floats(z, {2, 3, 4});
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(last_step().params[0].reason, AliasReason::UserRequested);
  EXPECT_TRUE(is_donated(t));
  expect_error([&] { (void)(t - 1); }, {"[sub]", "donated"});
}

TEST_P(Donation, DonationPatternIsPartOfTheCacheKey) {
  clear_program_cache();
  Tensor x = materialized({1, 2, 3}, {3});
  x.add_(1);
  mark_step();  // donates: program A
  uint64_t donating = last_step().graph_hash;
  int64_t compiles = testing::counter("UncachedCompile");
  Tensor keep = x.clone();  // shares x's buffer: the same graph may not donate now
  x.add_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 0);
  EXPECT_NE(last_step().graph_hash, donating);
  EXPECT_EQ(testing::counter("UncachedCompile"), compiles + 1);
  expect_floats(keep, {2, 3, 4});
  expect_floats(x, {3, 4, 5});
  keep = Tensor();
  x.add_(1);
  mark_step();  // donating again: program A from the cache
  EXPECT_EQ(last_step().graph_hash, donating);
  EXPECT_TRUE(last_step().cache_hit);
  EXPECT_EQ(last_step().num_donated, 1);
  expect_floats(x, {4, 5, 6});
}

TEST_P(Donation, InPlaceThroughViewsDonatesTheBase) {
  Tensor x = materialized(testing::iota(6), {2, 3});
  Tensor row = x.select(0, 1);
  Tensor col = x.slice(1, 0, 3, 2);
  row.add_(10);
  col.mul_(2);
  x.t().select(0, 1).sub_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  // x = [[0,1,2],[3,4,5]] -> row 1 += 10 -> cols 0,2 *= 2 -> column 1 -= 1
  expect_floats(x, {0, 0, 4, 26, 13, 30});
  expect_floats(row, {26, 13, 30});
  expect_floats(col, {0, 4, 26, 30});
}

TEST_P(Donation, ChainAcrossStepsRestartsFromTheNewBuffer) {
  Tensor x = materialized({1, 2}, {2});
  for (int step = 0; step < 5; ++step) {
    x.add_(1);
    x.mul_(2);
    mark_step();
    EXPECT_EQ(last_step().num_donated, 1) << "step " << step;
    EXPECT_EQ(last_step().bytes_allocated, 0) << "step " << step;
  }
  // ((v + 1) * 2) five times
  float a = 1, b = 2;
  for (int i = 0; i < 5; ++i) {
    a = (a + 1) * 2;
    b = (b + 1) * 2;
  }
  expect_floats(x, {a, b});
}

TEST_P(Donation, DisabledByEnvironment) {
  setenv("LAZYX_ENABLE_PARAM_ALIASING", "0", 1);
  Tensor x = materialized({1, 2}, {2});
  x.add_(1);
  mark_step();
  unsetenv("LAZYX_ENABLE_PARAM_ALIASING");
  ASSERT_EQ(last_step().params.size(), 1u);
  EXPECT_FALSE(last_step().params[0].donated);
  EXPECT_EQ(last_step().params[0].reason, AliasReason::Disabled);
  expect_floats(x, {2, 3});
}

TEST_P(Donation, DeadTensorsAreNotComputedAndBuffersNotRecomputed) {
  Tensor x = materialized({1, 2}, {2});
  { Tensor dead = x * 100; }
  mark_step();
  EXPECT_FALSE(last_step().ran_program);
  Tensor y = x + 1;
  mark_step();
  EXPECT_EQ(last_step().num_outputs, 1);  // only y; x already holds a buffer
}

TEST_P(Donation, CopyFromAnotherTensorThenUpdateThatTensor) {
  // dst takes src's buffer as its value; src is then updated in place. src's buffer must not be
  // donated, or dst would see the new value.
  Tensor src = materialized({1, 2, 3}, {3});
  Tensor dst = materialized({0, 0, 0}, {3});
  dst.copy_(src);
  src.add_(5);
  mark_step();
  expect_floats(dst, {1, 2, 3});
  expect_floats(src, {6, 7, 8});
}

TEST_P(Donation, SwapThroughClones) {
  Tensor a = materialized({1, 2}, {2});
  Tensor b = materialized({3, 4}, {2});
  Tensor a_old = a * 1;
  a.copy_(b);
  b.copy_(a_old);
  mark_step();
  expect_floats(a, {3, 4});
  expect_floats(b, {1, 2});
}

INSTANTIATE_TEST_SUITE_P(Backends, Donation, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx

namespace lazyx {
namespace {

class Overwrite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    mark_step();
  }
};

// A tensor overwritten without reading its old value reuses its buffer at a step barrier.
TEST_P(Overwrite, FillZeroAndConvertingCopyReuseTheBuffer) {
  Tensor x = testing::materialized({1, 2, 3, 4}, {4});
  Tensor i = tensor<int32_t>({5, 6, 7, 8});
  x.zero_();
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(last_step().bytes_allocated, 0);
  testing::expect_floats(x, {0, 0, 0, 0});
  x.fill_(2.5);
  mark_step();
  EXPECT_EQ(last_step().bytes_allocated, 0);
  testing::expect_floats(x, {2.5, 2.5, 2.5, 2.5});
  x.copy_(i);  // int32 -> float32: a conversion, so a program, and x's buffer takes the result
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(last_step().bytes_allocated, 0);
  testing::expect_floats(x, {5, 6, 7, 8});
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{5, 6, 7, 8}));
}

TEST_P(Overwrite, NotWhenSomethingElseStillNeedsTheOldValue) {
  Tensor x = testing::materialized({1, 2}, {2});
  Tensor keep = x.clone();  // shares x's buffer
  x.fill_(7);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 0);
  testing::expect_floats(keep, {1, 2});
  testing::expect_floats(x, {7, 7});
  // A partial sync never reuses it either: y, outside the sync, still reads the old value.
  Tensor y = x * 2;
  x.zero_();
  sync({x});
  EXPECT_EQ(last_step().num_donated, 0);
  testing::expect_floats(y, {14, 14});
  testing::expect_floats(x, {0, 0});
}

INSTANTIATE_TEST_SUITE_P(Backends, Overwrite, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
