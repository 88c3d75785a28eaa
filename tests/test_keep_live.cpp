// What a partial sync computes, it keeps: live pending tensors in the graph of a value read or
// sync(tensors) are materialized by the same program (ALIASING.md, "Live values"). Values are
// checked against the reference backend with keep-live off (LAZYX_KEEP_LIVE=0).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "test_util.h"

namespace lazyx {
namespace {

using testing::counter;
using testing::expect_error;
using testing::materialized;

bool contains(const std::vector<int64_t>& v, int64_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

// Runs `f` on `backend`, with keep-live on or off, and returns what it returned.
std::vector<float> run_on(const std::string& backend, bool keep,
                          const std::function<std::vector<float>()>& f) {
  const std::string before = backend_name();
  if (!keep) setenv("LAZYX_KEEP_LIVE", "0", 1);
  set_backend(backend);
  std::vector<float> r = f();
  mark_step();
  unsetenv("LAZYX_KEEP_LIVE");
  set_backend(before);
  return r;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << "at " << i;
  }
}

class KeepLive : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    unsetenv("LAZYX_KEEP_LIVE");
    set_backend(GetParam());
    mark_step();
    metrics::clear_all();
  }
  void TearDown() override { unsetenv("LAZYX_KEEP_LIVE"); }

  // Compares `f` here against the reference backend with keep-live off.
  void check_values(const std::function<std::vector<float>()>& f) {
    std::vector<float> got = run_on(GetParam(), true, f);
    std::vector<float> want = run_on("reference", false, f);
    expect_near(got, want);
  }
};

// The loop that made every read re-run a longer history: it compiles once and w is kept.
TEST_P(KeepLive, ReadLoopCompilesFlatAndKeepsTheUpdatedTensor) {
  Tensor w = zeros({1000});
  mark_step();
  std::vector<int64_t> compiles;
  for (int k = 0; k < 6; ++k) {
    w.add_(1.0);
    float s = (w * 2).sum().item<float>();
    EXPECT_FLOAT_EQ(s, 2000.0f * static_cast<float>(k + 1));
    EXPECT_FALSE(w.is_pending()) << "read " << k;
    StepReport r = last_step();
    EXPECT_TRUE(contains(r.kept_live, w.storage_id()));
    EXPECT_LE(r.num_nodes, 8) << r.to_string();  // the same small graph every time
    compiles.push_back(counter("UncachedCompile"));
  }
  EXPECT_EQ(compiles.front(), compiles.back());
}

TEST_P(KeepLive, ReportListsMaterializedAndKeptTensors) {
  Tensor w = materialized({1, 2, 3, 4}, {4});
  w.mul_(3.0);
  Tensor s = (w + 1).sum();
  EXPECT_FLOAT_EQ(s.item<float>(), 34.0f);
  StepReport r = last_step();
  EXPECT_EQ(r.kind, "read");
  EXPECT_TRUE(contains(r.materialized, s.storage_id()));
  EXPECT_TRUE(contains(r.materialized, w.storage_id()));
  EXPECT_EQ(r.kept_live, std::vector<int64_t>{w.storage_id()});
  EXPECT_EQ(r.num_outputs, 2);
  EXPECT_NE(r.to_string().find("kept live: tensor " + std::to_string(w.storage_id())),
            std::string::npos);
}

TEST_P(KeepLive, LaterReadStartsFromTheKeptValue) {
  Tensor w = materialized({1, 2, 3, 4}, {4});
  w.add_(10.0);
  (void)w.sum().item<float>();
  Tensor e = w.exp();
  const float want = std::exp(11.f) + std::exp(12.f) + std::exp(13.f) + std::exp(14.f);
  EXPECT_NEAR(e.sum().item<float>(), want, 1e-5 * want);
  StepReport r = last_step();
  ASSERT_EQ(r.num_parameters, 1);  // w's kept buffer; the add is not run again
  EXPECT_FALSE(r.params[0].donated);
}

TEST_P(KeepLive, DeadIntermediatesAreNotKept) {
  Tensor w = materialized({1, 2, 3}, {3});
  w.add_(1.0);
  Tensor s = ((w * 2) * 3).sum();  // the products die at the end of this statement
  EXPECT_FLOAT_EQ(s.item<float>(), 54.0f);
  StepReport r = last_step();
  EXPECT_EQ(r.kept_live, std::vector<int64_t>{w.storage_id()});
  EXPECT_EQ(r.num_outputs, 2);  // the sum and w, not the products nobody holds
}

TEST_P(KeepLive, HeldIntermediateIsKept) {
  Tensor w = materialized({1, 2, 3}, {3});
  Tensor y = w * 2;
  Tensor z = y + 1;
  EXPECT_FLOAT_EQ(z.sum().item<float>(), 15.0f);
  EXPECT_FALSE(y.is_pending());
  EXPECT_FALSE(z.is_pending());
  testing::expect_floats(y, {2, 4, 6});
}

TEST_P(KeepLive, TensorsOutsideTheReadStayPending) {
  Tensor a = materialized({1, 2}, {2});
  Tensor b = materialized({5, 6}, {2});
  a.add_(1.0);
  b.add_(1.0);
  EXPECT_FLOAT_EQ(a.sum().item<float>(), 5.0f);
  EXPECT_FALSE(a.is_pending());
  EXPECT_TRUE(b.is_pending());
  EXPECT_EQ(last_step().kept_live, std::vector<int64_t>{a.storage_id()});  // b is not in it
}

TEST_P(KeepLive, ReadNeverDonatesAndTheNextStepDonatesTheNewBuffer) {
  Tensor w = materialized(testing::iota(64), {64});
  w.add_(1.0);
  EXPECT_FLOAT_EQ((w * 0.5).sum().item<float>(), 0.5f * (63 * 64 / 2 + 64));
  StepReport r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_FALSE(r.params[0].donated);  // rule 2: the read wrote w into a new buffer
  EXPECT_EQ(r.num_donated, 0);
  w.mul_(2.0);
  mark_step();
  r = last_step();
  ASSERT_EQ(r.params.size(), 1u);
  EXPECT_TRUE(r.params[0].donated);
  EXPECT_EQ(r.params[0].reason, AliasReason::InPlaceUpdate);
  EXPECT_EQ(r.params[0].output_tensor_id, w.storage_id());
  EXPECT_EQ(r.bytes_allocated, 0);
  std::vector<float> want(64);
  for (int i = 0; i < 64; ++i) want[i] = (static_cast<float>(i) + 1) * 2;
  testing::expect_floats(w, want);
}

TEST_P(KeepLive, PartialSyncKeepsLiveTensorsAndNeverDonates) {
  Tensor w = materialized({1, 2, 3, 4}, {4});
  Tensor m = materialized({0, 0, 0, 0}, {4});
  w.add_(1.0);
  m.mul_(0.9);
  m.add_(w);
  Tensor loss = (m * m).sum();
  sync({loss});
  StepReport r = last_step();
  EXPECT_EQ(r.kind, "sync");
  EXPECT_FALSE(w.is_pending());
  EXPECT_FALSE(m.is_pending());
  EXPECT_EQ(r.num_donated, 0);
  for (const ParamReport& p : r.params) EXPECT_FALSE(p.donated);
  EXPECT_FLOAT_EQ(loss.item<float>(), 4 + 9 + 16 + 25);
  m.add_(1.0);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  testing::expect_floats(m, {3, 4, 5, 6});
}

TEST_P(KeepLive, ViewOfAPendingBaseKeepsTheBase) {
  Tensor b = materialized(testing::iota(12), {3, 4});
  b.add_(1.0);
  Tensor row = b.select(0, 1);
  EXPECT_FLOAT_EQ(row.sum().item<float>(), 5 + 6 + 7 + 8);
  EXPECT_FALSE(b.is_pending());
  EXPECT_TRUE(contains(last_step().kept_live, b.storage_id()));
  row.mul_(10.0);  // through the view into the kept base
  mark_step();
  testing::expect_floats(b, {1, 2, 3, 4, 50, 60, 70, 80, 9, 10, 11, 12});
  EXPECT_EQ(last_step().num_donated, 1);
}

TEST_P(KeepLive, BaseHeldOnlyByAViewIsKept) {
  Tensor v;
  {
    Tensor b = materialized(testing::iota(8), {8});
    b.mul_(2.0);
    v = b.narrow(0, 2, 4);
  }
  Tensor s = (v + 0).sum();
  EXPECT_FLOAT_EQ(s.item<float>(), 2 * (2 + 3 + 4 + 5));
  EXPECT_FALSE(v.is_pending());
  EXPECT_TRUE(contains(last_step().kept_live, v.storage_id()));
  testing::expect_floats(v, {4, 6, 8, 10});
}

TEST_P(KeepLive, KeptTensorStaysCorrectUnderFurtherUpdates) {
  check_values([] {
    Tensor w = materialized(testing::iota(16, -2.f, 0.25f), {4, 4});
    Tensor m = zeros({4, 4});
    mark_step();
    std::vector<float> out;
    for (int k = 0; k < 4; ++k) {
      Tensor g = (w * w).sum({1}, true).expand({4, 4}) * 0.01;
      m.mul_(0.9).add_(g);
      w.sub_(m);
      out.push_back((w.exp().sum() + m.sum()).item<float>());
      Tensor col = w.select(1, k);
      col.add_(1.0);
      out.push_back(col.sum().item<float>());
    }
    for (float x : w.to_vector<float>()) out.push_back(x);
    return out;
  });
}

TEST_P(KeepLive, MatmulChainWithReadsMatchesReference) {
  check_values([] {
    manual_seed(3);
    Tensor a = randn({8, 8});
    Tensor x = randn({8, 2});
    mark_step();
    std::vector<float> out;
    for (int k = 0; k < 3; ++k) {
      Tensor h = a.matmul(x).tanh();
      x.add_(h, -0.1);
      out.push_back(h.abs().amax().item<float>());
      out.push_back(x.sum().item<float>());
    }
    for (float v : x.to_vector<float>()) out.push_back(v);
    return out;
  });
}

TEST_P(KeepLive, FailedReadChangesNothing) {
  Tensor w = materialized({1, 2, 3}, {3});
  w.add_(1.0);
  Tensor bad = tensor<int64_t>({0, 3}, {2}) + 4;  // pending: checked when the program runs
  Tensor picked = w.index_select(0, bad);
  expect_error([&] { (void)picked.sum().item<float>(); }, {"index"});
  EXPECT_TRUE(w.is_pending());
  testing::expect_floats(w, {2, 3, 4});
}

TEST_P(KeepLive, SwitchOffAndInvalidValue) {
  Tensor w = materialized({1, 2}, {2});
  w.add_(1.0);
  setenv("LAZYX_KEEP_LIVE", "maybe", 1);
  int64_t step = last_step().step;
  expect_error([&] { (void)(w * 2).sum().item<float>(); }, {"LAZYX_KEEP_LIVE", "maybe"});
  EXPECT_TRUE(w.is_pending());
  EXPECT_EQ(last_step().step, step);  // the read did nothing
  setenv("LAZYX_KEEP_LIVE", "0", 1);
  EXPECT_FLOAT_EQ((w * 2).sum().item<float>(), 10.0f);
  EXPECT_TRUE(w.is_pending());
  EXPECT_TRUE(last_step().kept_live.empty());
  unsetenv("LAZYX_KEEP_LIVE");
  EXPECT_FLOAT_EQ((w * 3).sum().item<float>(), 15.0f);
  EXPECT_FALSE(w.is_pending());
}

TEST_P(KeepLive, UserDonationStillAppliesToAKeepingRead) {
  Tensor g = materialized({1, 2, 3, 4}, {4});
  Tensor w = materialized({0, 0, 0, 0}, {4});
  ASSERT_TRUE(set_buffer_donation(g, true));
  w.add_(g * 2);
  EXPECT_FLOAT_EQ((w + 0).sum().item<float>(), 20.0f);  // w is kept, not asked for
  EXPECT_TRUE(contains(last_step().kept_live, w.storage_id()));
  EXPECT_TRUE(is_donated(g));
  EXPECT_EQ(last_step().num_donated, 1);
  testing::expect_floats(w, {2, 4, 6, 8});
}

TEST_P(KeepLive, MarkStepReportsNoKeptTensors) {
  Tensor w = materialized({1, 2}, {2});
  Tensor y = w * 2;
  mark_step();
  StepReport r = last_step();
  EXPECT_TRUE(r.kept_live.empty());
  EXPECT_TRUE(contains(r.materialized, y.storage_id()));
}

INSTANTIATE_TEST_SUITE_P(Backends, KeepLive, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
