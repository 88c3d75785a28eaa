// The executor: program cache, hashing, reports, metrics, dumps.
#include "test_util.h"

namespace lazyx {
namespace {

using testing::counter;
using testing::expect_floats;
using testing::materialized;

class Executor : public ::testing::Test {
 protected:
  void SetUp() override {
    set_backend("reference");
    mark_step();
    clear_program_cache();
    metrics::clear_all();
  }
};

TEST_F(Executor, SameGraphHitsTheCache) {
  Tensor x = materialized({1, 2, 3}, {3});
  for (int i = 0; i < 3; ++i) {
    x.add_(1);
    mark_step();
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
  EXPECT_EQ(counter("CachedCompile"), 2);
  EXPECT_EQ(counter("MarkStep"), 3);
  EXPECT_EQ(counter("ExecuteComputation"), 3);
  EXPECT_EQ(program_cache_size(), 1);
  expect_floats(x, {4, 5, 6});
}

// Reports reuse the lists of the report before last: one with nothing to run must not show
// that report's parameters.
TEST_F(Executor, ReportOfAStepWithNothingToRunListsNoParameters) {
  Tensor x = materialized({1, 2, 3}, {3});
  x.add_(1);
  mark_step();
  ASSERT_EQ(last_step().params.size(), 1u);
  EXPECT_EQ(last_step().num_donated, 1);
  mark_step();
  mark_step();  // writes into the first step's report
  StepReport r = last_step();
  EXPECT_FALSE(r.ran_program);
  EXPECT_TRUE(r.params.empty());
  EXPECT_EQ(r.num_donated, 0);
  expect_floats(x, {2, 3, 4});
}

TEST_F(Executor, ScalarValuesDoNotRecompile) {
  Tensor w = materialized({1, 1}, {2});
  Tensor g = materialized({1, 2}, {2});
  uint64_t hash = 0;
  float lr = 0.5f;
  for (int i = 0; i < 4; ++i, lr /= 2) {
    w.add_(g, -lr);
    w *= 1.0 + i;
    mark_step();
    if (i == 0) hash = last_step().graph_hash;
    EXPECT_EQ(last_step().graph_hash, hash);
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
  // ((((1 - .5)*1 - .25)*2 - .125)*3 - .0625)*4 for the first element
  float a = 1, b = 1;
  lr = 0.5f;
  for (int i = 0; i < 4; ++i, lr /= 2) {
    a = (a - lr * 1) * (1 + i);
    b = (b - lr * 2) * (1 + i);
  }
  expect_floats(w, {a, b});
}

// Scalar nodes are reused across steps, but never shared inside one graph: whether two
// scalars of a step happen to be equal must not change the program.
TEST_F(Executor, EqualScalarsInAStepDoNotChangeTheProgram) {
  Tensor x = materialized({1, 2}, {2});
  const double values[3][2] = {{2, 3}, {2, 2}, {3, 3}};
  for (int i = 0; i < 3; ++i) {
    x.mul_(values[i][0]);
    x.add_(values[i][1]);
    mark_step();
    EXPECT_EQ(last_step().num_scalars, 2) << "step " << i;
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
  expect_floats(x, {((1 * 2 + 3) * 2 + 2) * 3 + 3.0f, ((2 * 2 + 3) * 2 + 2) * 3 + 3.0f});
}

// A tensor's parameter node is reused across steps only once no pending graph reads it: here
// y still reads x's old value when x is updated and synced alone.
TEST_F(Executor, ParameterNodeReadByAPendingGraphIsNotReused) {
  Tensor x = materialized({1, 2}, {2});
  for (int i = 0; i < 2; ++i) {
    Tensor y = x * 10;  // pending: reads x's current buffer
    x.add_(1);
    sync({x});
    expect_floats(x, {2.0f + i, 3.0f + i});
    expect_floats(y, {10.0f * (1 + i), 10.0f * (2 + i)});
  }
  x.add_(1);
  mark_step();
  expect_floats(x, {4, 5});
}

TEST_F(Executor, NewRandomSeedDoesNotRecompile) {
  Tensor prev;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    manual_seed(seed);
    Tensor r = rand({8});
    mark_step();
    if (prev.defined()) {
      EXPECT_NE(r.to_vector<float>(), prev.to_vector<float>());
    }
    prev = r;
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

TEST_F(Executor, ParameterIdentityIsPartOfTheKey) {
  Tensor a = materialized({1, 2}, {2});
  Tensor b = materialized({10, 20}, {2});
  Tensor s1 = a + b;
  mark_step();
  uint64_t h1 = last_step().graph_hash;
  Tensor s2 = a + a;  // the same node hashes, but one parameter instead of two
  mark_step();
  EXPECT_NE(last_step().graph_hash, h1);
  EXPECT_EQ(last_step().num_parameters, 1);
  expect_floats(s1, {11, 22});
  expect_floats(s2, {2, 4});
}

TEST_F(Executor, HashIsDeterministicAcrossRebuilds) {
  auto build = [] {
    Tensor x = materialized({1, 2, 3, 4}, {2, 2});
    Tensor y = (x.relu() * 2).sum({1});
    mark_step();
    return last_step().graph_hash;
  };
  EXPECT_EQ(build(), build());
}

TEST_F(Executor, ReportDescribesTheStep) {
  Tensor x = materialized({1, 2, 3}, {3});
  Tensor g = materialized({1, 1, 1}, {3});
  Tensor y = x * 2 + g;
  x.add_(g);
  mark_step();
  StepReport r = last_step();
  EXPECT_EQ(r.kind, "mark_step");
  EXPECT_TRUE(r.ran_program);
  EXPECT_FALSE(r.cache_hit);
  EXPECT_EQ(r.num_parameters, 2);
  EXPECT_EQ(r.num_outputs, 2);
  EXPECT_EQ(r.num_donated, 1);
  EXPECT_EQ(r.donated_bytes, 12);
  EXPECT_EQ(r.bytes_allocated, 12);  // y's buffer
  EXPECT_GT(r.num_nodes, 4);
  std::string text = r.to_string();
  EXPECT_NE(text.find("donated (in-place update"), std::string::npos) << text;
  EXPECT_NE(text.find("kept (not updated"), std::string::npos) << text;
  auto m = metrics::metric_data("TensorsGraphSize");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->total_samples, 1);
  EXPECT_EQ(m->samples.back(), static_cast<double>(r.num_nodes));
  ASSERT_TRUE(metrics::metric_data("CompileTime").has_value());
  ASSERT_TRUE(metrics::metric_data("ExecuteTime").has_value());
}

TEST_F(Executor, MetricsReportListsEverything) {
  Tensor x = materialized({1}, {1});
  x.add_(1);
  mark_step();
  std::string rep = metrics::metrics_report();
  for (const char* name : {"Metric: CompileTime", "Metric: ExecuteTime", "Metric: InputOutputAliasCount",
                           "Metric: TensorsGraphSize", "Counter: MarkStep", "Counter: UncachedCompile",
                           "Counter: ExecuteComputation", "TotalSamples: 1", "Accumulator: 1"}) {
    EXPECT_NE(rep.find(name), std::string::npos) << name << "\n" << rep;
  }
  metrics::clear_counters();
  EXPECT_FALSE(metrics::counter_value("MarkStep").has_value());
  EXPECT_TRUE(metrics::metric_data("CompileTime").has_value());
  metrics::clear_metrics();
  EXPECT_TRUE(metrics::metric_names().empty());
}

TEST_F(Executor, GraphDumps) {
  Tensor x = materialized({1, 2}, {2});
  Tensor y = (x + 1).exp();
  std::string text = graph_text({y});
  EXPECT_NE(text.find("parameter()"), std::string::npos) << text;
  EXPECT_NE(text.find("add("), std::string::npos) << text;
  EXPECT_NE(text.find("exp("), std::string::npos) << text;
  EXPECT_NE(text.find("ROOT 0"), std::string::npos) << text;
  std::string dot = graph_dot({y, x});
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("->"), std::string::npos);
  EXPECT_TRUE(y.is_pending());  // dumping runs nothing
}

TEST_F(Executor, GraphDumpsOfViewsOfTemporaries) {
  // The view's gather node exists only for the dump; it must outlive the text it labels.
  Tensor x = materialized({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.sum({0}, true).view({3});
  Tensor t = (x * 2).transpose(0, 1);
  std::string text = graph_text({v, t});
  EXPECT_NE(text.find("sum("), std::string::npos) << text;
  EXPECT_NE(text.find("as_strided("), std::string::npos) << text;
  EXPECT_NE(text.find("ROOT 1"), std::string::npos) << text;
  std::string dot = graph_dot({t, v});
  EXPECT_NE(dot.find("as_strided"), std::string::npos) << dot;
}

TEST_F(Executor, SyncOnlyWhatIsAsked) {
  Tensor x = materialized({1, 2}, {2});
  Tensor a = x + 1;
  Tensor b = x + 2;
  sync({a});
  EXPECT_FALSE(a.is_pending());
  EXPECT_TRUE(b.is_pending());
  EXPECT_EQ(last_step().num_outputs, 1);
  EXPECT_FLOAT_EQ(b.select(0, 1).item<float>(), 4);
  EXPECT_EQ(last_step().kind, "read");
  EXPECT_FALSE(b.is_pending());  // a read of a view materializes its base
}

TEST_F(Executor, CacheIsBoundedLru) {
  for (int i = 1; i <= 5; ++i) {
    Tensor x = full({i}, 1.0);
    mark_step();
  }
  EXPECT_EQ(program_cache_size(), 5);
  clear_program_cache();
  EXPECT_EQ(program_cache_size(), 0);
}

TEST_F(Executor, ViewsOfPendingValuesAndBack) {
  Tensor x = materialized(testing::iota(12), {3, 4});
  Tensor v = x.t().reshape({2, 6});  // non-contiguous: reshape copies
  EXPECT_FALSE(v.is_view());
  Tensor w = x.view({4, 3});
  EXPECT_TRUE(w.is_view());
  w.select(1, 0).fill_(-1);
  mark_step();
  expect_floats(x, {-1, 1, 2, -1, 4, 5, -1, 7, 8, -1, 10, 11});
  expect_floats(v, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

}  // namespace
}  // namespace lazyx

namespace lazyx {
namespace {

TEST(HostCopies, FromHostAndCopyToHost) {
  std::vector<int32_t> v{1, 2, 3, 4, 5, 6};
  Tensor t = from_host(v.data(), {2, 3}, kInt32);
  EXPECT_FALSE(t.is_pending());
  std::vector<int32_t> back(6);
  t.copy_to_host(back.data());
  EXPECT_EQ(back, v);
  Tensor tt = t.t() * 10;  // pending, then a strided view of its result
  std::vector<int32_t> out(6);
  tt.copy_to_host(out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{10, 40, 20, 50, 30, 60}));
  std::vector<int32_t> col(2);
  t.select(1, 2).copy_to_host(col.data());
  EXPECT_EQ(col, (std::vector<int32_t>{3, 6}));
}

}  // namespace
}  // namespace lazyx
