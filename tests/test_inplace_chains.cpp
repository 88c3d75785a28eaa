// Several in-place updates of one donated tensor in one step (through views, index ops and
// elementwise) run in its buffer, in order, without a full-size scratch copy, on every backend.
#include <functional>

#include "test_util.h"

namespace lazyx {
namespace {

constexpr int64_t kR = 4096, kC = 1024;  // 16 MiB of float32 (65536 rows: 256 MiB)

class InPlaceChains : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    mark_step();
  }
};

using Update = std::function<void(Tensor&)>;
using HostUpdate = std::function<void(std::vector<float>&)>;

// Runs `update` on a donated table of `rows` x kC as one step; checks the peak stays within 10 %
// of the live set, nothing is allocated or staged, and the result matches the same updates on
// host values.
void expect_in_place(const Update& update, const HostUpdate& host_update, int64_t rows = kR) {
  static std::vector<float> host;  // reused: a fresh 256 MiB costs seconds in page faults here
  host.resize(rows * kC);
  for (int64_t i = 0; i < rows * kC; ++i) host[i] = static_cast<float>(i % 97);
  Tensor table = tensor<float>(host, {rows, kC});
  mark_step();
  update(table);  // warm-up: compile, fill the allocator's cache
  mark_step();
  host_update(host);
  const double live = static_cast<double>(memory_stats().bytes_in_use);
  reset_peak_memory_stats();
  update(table);
  mark_step();
  host_update(host);
  const StepReport r = last_step();
  EXPECT_EQ(r.num_donated, 1);
  EXPECT_EQ(r.bytes_allocated, 0);
  EXPECT_EQ(r.scratch_reason, "");
  EXPECT_LT(r.scratch_bytes, rows * kC * 4 / 10) << r.to_string();
  EXPECT_LT(static_cast<double>(memory_stats().peak_bytes), 1.1 * live)
      << memory_stats().to_string();
  std::vector<float> got = table.to_vector<float>();
  ASSERT_EQ(got.size(), host.size());
  // Every element; gtest's 4-ULP comparison only where the two differ at all (it is slow).
  for (size_t i = 0; i < host.size(); ++i) {
    if (got[i] != host[i]) {
      ASSERT_FLOAT_EQ(got[i], host[i]) << "at " << i;
    }
  }
}

void host_rows(std::vector<float>& h, int64_t r0, int64_t n, float mul, float add) {
  for (int64_t i = r0 * kC; i < (r0 + n) * kC; ++i) h[i] = h[i] * mul + add;
}

// Rows 3 and 7 of a table, and two rows of distinct values to put there.
Tensor rows_3_7() { return tensor<int64_t>({3, 7}, {2}); }
Tensor two_rows() { return tensor<float>(testing::iota(2 * kC, 1, 0.25f), {2, kC}); }
float two_rows_at(int64_t j, int64_t c) { return 1 + 0.25f * static_cast<float>(j * kC + c); }
void host_two_rows(std::vector<float>& h, int64_t r0, int64_t r1, float mul) {
  for (int64_t c = 0; c < kC; ++c) {
    h[r0 * kC + c] = mul * two_rows_at(0, c);
    h[r1 * kC + c] = mul * two_rows_at(1, c);
  }
}

// The chains of updates, each with its host equivalent, for a table of `rows` rows.
struct Chain {
  const char* name;
  Update update;
  HostUpdate host;
};

std::vector<Chain> chains(int64_t rows) {
  Tensor idx = rows_3_7(), src = two_rows();
  return {
      {"TwoSliceUpdates",
       [](Tensor& t) {
         t.narrow(0, 0, 100).add_(1);
         t.narrow(0, 50, 100).add_(2);
       },
       [](std::vector<float>& h) {
         host_rows(h, 0, 100, 1, 1);
         host_rows(h, 50, 100, 1, 2);
       }},
      {"FullUpdateThenViewsThenFill",
       [](Tensor& t) {
         t.mul_(0.5);
         t.narrow(0, 10, 20).add_(t.narrow(0, 40, 20));
         t.narrow(1, 3, 1).fill_(7);
         t.add_(1);
       },
       [rows](std::vector<float>& h) {
         host_rows(h, 0, rows, 0.5f, 0);
         for (int64_t i = 10 * kC; i < 30 * kC; ++i) h[i] += h[i + 30 * kC];
         for (int64_t r = 0; r < rows; ++r) h[r * kC + 3] = 7;
         host_rows(h, 0, rows, 1, 1);
       }},
      {"IndexPutAccumulateThenScale",
       [=](Tensor& t) {
         t.index_put_({idx}, src, /*accumulate=*/true);
         t.mul_(0.5);
       },
       [rows](std::vector<float>& h) {
         for (int64_t c = 0; c < kC; ++c) {
           h[3 * kC + c] += two_rows_at(0, c);
           h[7 * kC + c] += two_rows_at(1, c);
         }
         host_rows(h, 0, rows, 0.5f, 0);
       }},
      {"ScatterThenAdd",
       [=](Tensor& t) {
         t.scatter_(0, idx.view({-1, 1}).expand({-1, kC}), src);
         t.add_(1);
       },
       [rows](std::vector<float>& h) {
         host_two_rows(h, 3, 7, 1);
         host_rows(h, 0, rows, 1, 1);
       }},
      {"IndexCopyThenFillThenScale",
       [=](Tensor& t) {
         t.index_copy_(0, idx, src);
         t.narrow(0, 7, 2).fill_(-1);
         t.mul_(0.5);
       },
       [rows](std::vector<float>& h) {
         host_two_rows(h, 3, 7, 1);
         for (int64_t i = 7 * kC; i < 9 * kC; ++i) h[i] = -1;
         host_rows(h, 0, rows, 0.5f, 0);
       }},
      // Index ops check their indices as soon as the indices are computed, so the updates
      // before them need not wait for the op itself to run in the donated buffer.
      {"DecayThenIndexCopy",
       [=](Tensor& t) {
         t.mul_(0.5);
         t.index_copy_(0, idx, src);
       },
       [rows](std::vector<float>& h) {
         host_rows(h, 0, rows, 0.5f, 0);
         host_two_rows(h, 3, 7, 1);
       }},
      {"IndexCopyTwiceWithComputedIndices",
       [=](Tensor& t) {
         t.index_copy_(0, idx, src);
         t.index_copy_(0, idx + 1, src * 2);
       },
       [](std::vector<float>& h) {
         host_two_rows(h, 3, 7, 1);
         host_two_rows(h, 4, 8, 2);
       }},
  };
}

void run_chain(const std::string& name, int64_t rows) {
  std::vector<Chain> all = chains(rows);
  mark_step();
  for (const Chain& c : all) {
    if (name == c.name) return expect_in_place(c.update, c.host, rows);
  }
  FAIL() << "no chain " << name;
}

TEST_P(InPlaceChains, TwoSliceUpdates) { run_chain("TwoSliceUpdates", kR); }
TEST_P(InPlaceChains, FullUpdateThenViewsThenFill) { run_chain("FullUpdateThenViewsThenFill", kR); }
TEST_P(InPlaceChains, IndexPutAccumulateThenScale) { run_chain("IndexPutAccumulateThenScale", kR); }
TEST_P(InPlaceChains, ScatterThenAdd) { run_chain("ScatterThenAdd", kR); }
TEST_P(InPlaceChains, IndexCopyThenFillThenScale) { run_chain("IndexCopyThenFillThenScale", kR); }
TEST_P(InPlaceChains, DecayThenIndexCopy) { run_chain("DecayThenIndexCopy", kR); }
TEST_P(InPlaceChains, IndexCopyTwiceWithComputedIndices) {
  run_chain("IndexCopyTwiceWithComputedIndices", kR);
}

// A bad index fails the step before anything donated is written, although the update before
// the index op runs in place: a value read from the old buffer afterwards is unchanged.
TEST_P(InPlaceChains, BadIndexAfterInPlaceUpdateChangesNothing) {
  Tensor table = full({kR, kC}, 1.0f);
  Tensor bad = tensor<int64_t>({0, kR - 1}, {2});
  Tensor src = full({2, kC}, 5.0f);
  mark_step();
  Tensor before = table.narrow(0, 0, 8) * 1;
  table.mul_(0.5);
  table.index_copy_(0, bad + 1, src);  // {1, kR}, found when the step runs
  testing::expect_error([&] { mark_step(); }, {"index_copy", "nothing was changed"});
  std::vector<float> got = before.to_vector<float>();
  for (float v : got) ASSERT_EQ(v, 1.0f);
}

// An update followed by an index op whose indices are computed from the update: the update
// cannot run in the donated buffer (a failed step must change nothing), so the step reports the
// copy and its size.
TEST_P(InPlaceChains, ForcedCopyIsReportedAndCounted) {
  Tensor table = full({kR, kC}, 6.0f);
  Tensor src = full({2, kC}, 5.0f);
  mark_step();
  table.mul_(0.5);
  Tensor idx = table.narrow(0, 0, 2).select(1, 0).to(kInt64);  // {3, 3}
  table.index_copy_(0, idx, src);
  mark_step();
  const StepReport r = last_step();
  EXPECT_EQ(r.num_donated, 1);
  EXPECT_NE(r.scratch_reason.find("can fail"), std::string::npos) << r.scratch_reason;
  EXPECT_NE(r.scratch_reason.find("mul"), std::string::npos) << r.scratch_reason;
  EXPECT_GE(r.scratch_bytes, kR * kC * 4) << r.to_string();
  EXPECT_NE(r.to_string().find("scratch copy:"), std::string::npos);
  EXPECT_EQ(table.select(0, 3).to_vector<float>()[0], 5.0f);
  EXPECT_EQ(table.select(0, 4).to_vector<float>()[0], 3.0f);
  // A chain that runs in place reports no copy.
  table.narrow(0, 0, 10).add_(1);
  table.narrow(0, 5, 10).add_(1);
  mark_step();
  EXPECT_EQ(last_step().scratch_reason, "");
  EXPECT_LT(last_step().scratch_bytes, kR * kC * 4 / 10) << last_step().to_string();
  EXPECT_EQ(table.select(0, 3).to_vector<float>()[0], 6.0f);
  EXPECT_EQ(table.select(0, 7).to_vector<float>()[0], 5.0f);
}

INSTANTIATE_TEST_SUITE_P(Backends, InPlaceChains, ::testing::ValuesIn(backend_names()));

// Every chain above on a 256 MiB table, on every backend built (the sanitizer build has only
// the reference backend): the peak stays within 10 % of the live set, no scratch copy.
TEST(InPlaceChainsLarge, EveryChainOn256MiB) {
  constexpr int64_t rows = 65536;
  for (const std::string& backend : backend_names()) {
    set_backend(backend);
    for (const Chain& c : chains(rows)) {
      SCOPED_TRACE(backend + " " + c.name);
      mark_step();
      expect_in_place(c.update, c.host, rows);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace lazyx
