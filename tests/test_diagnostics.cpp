// Why lazyx compiles and syncs: the cause of each sync, what differs from the nearest program
// compiled at the same site (and the CompileCause:<kind> counters), the warning when compiles
// keep happening, debug output to LAZYX_DEBUG_FILE, strict mode and the timeline.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "graph/diagnostics.h"
#include "test_util.h"

using namespace lazyx;
using lazyx::testing::counter;
using lazyx::testing::expect_error;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const char* stem) {
  return "/tmp/lazyx-diag-" + std::to_string(::getpid()) + "-" + stem;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The compile reason of a sync of (x * 2 + 1).sum() inside a scope naming the site.
std::string compile_at(const char* site, const Tensor& y) {
  SyncCause cause(site);
  sync({y});
  StepReport r = last_step();
  EXPECT_FALSE(r.cache_hit);
  EXPECT_EQ(r.cause, site);
  return r.compile_reason;
}

class Diagnostics : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_program_cache();  // every test's programs compile anew
    graph::diag::reset_history();
    metrics::clear_counters();
    set_debug(0);
    allow_sync(true);
  }
  void TearDown() override {
    set_debug(0);
    allow_sync(true);
  }
};

}  // namespace

TEST_F(Diagnostics, EachSyncNamesItsCause) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {4});
  Tensor y = x * 3;
  mark_step();
  EXPECT_EQ(last_step().cause, "user mark_step");
  Tensor a = y + 1;
  sync({a});
  EXPECT_EQ(last_step().cause, "partial sync");
  Tensor b = y.sum();
  EXPECT_FLOAT_EQ(b.item<float>(), 30);
  EXPECT_EQ(last_step().cause, "value read by item()");
  EXPECT_TRUE(has(last_step().to_string(), "\n  cause: value read by item()\n"));
  Tensor c = y - 1;
  EXPECT_EQ(c.to_vector<float>()[3], 11);
  EXPECT_EQ(last_step().cause, "value read by to_vector()");
  {  // a C++ caller's scope names the cause; the outermost scope wins
    SyncCause outer("eval loop");
    SyncCause inner("metric");
    Tensor d = y * y;
    (void)d.to_vector<float>();
    EXPECT_EQ(last_step().cause, "eval loop");
  }
}

TEST_F(Diagnostics, RecompileNamesInputShapeAndDtype) {
  Tensor x4 = full({4, 3}, 1.0f), x5 = full({5, 3}, 1.0f), xd = full({5, 3}, 1.0, kFloat64);
  mark_step();
  metrics::clear_counters();
  EXPECT_EQ(compile_at("shape site", (x4 * 2 + 1).sum()), "");
  EXPECT_EQ(counter("CompileCause:first_compile"), 1);
  std::string why = compile_at("shape site", (x5 * 2 + 1).sum());
  EXPECT_TRUE(has(why, "input 0 shape [5, 3] vs [4, 3]")) << why;
  EXPECT_TRUE(has(why, "nearest program from this site: graph ")) << why;
  EXPECT_EQ(counter("CompileCause:input_shape"), 1);
  EXPECT_TRUE(has(last_step().to_string(), "\n  compiled because: input 0 shape [5, 3] vs"));
  why = compile_at("shape site", (xd * 2 + 1).sum());
  EXPECT_TRUE(has(why, "input 0 dtype float64 vs float32")) << why;
  EXPECT_EQ(counter("CompileCause:input_dtype"), 1);
}

TEST_F(Diagnostics, RecompileNamesChangedOp) {
  Tensor x = full({6}, 2.0f);
  mark_step();
  metrics::clear_counters();
  compile_at("op site", (x * 3).exp());
  std::string why = compile_at("op site", (x * 3).tanh());
  EXPECT_TRUE(has(why, ": tanh vs exp")) << why;
  EXPECT_EQ(why.rfind("op ", 0), 0u) << why;
  EXPECT_EQ(counter("CompileCause:op"), 1);
}

TEST_F(Diagnostics, RecompileNamesConstantBakedIntoTheGraph) {
  Tensor x = full({4, 4}, 1.0f);
  mark_step();
  metrics::clear_counters();
  compile_at("dim site", (x + 1).sum({0}));
  std::string why = compile_at("dim site", (x + 1).sum({1}));
  EXPECT_TRUE(has(why, "(sum): a constant baked into the graph changed (dims [1] vs [0]")) << why;
  EXPECT_EQ(counter("CompileCause:baked_constant"), 1);
  // A new host scalar is a run-time operand: the same program, no compile. (Named tensors: a
  // temporary alive at the sync would be kept live, an extra output of another program.)
  SyncCause cause("dim site");
  Tensor y1 = (x + 1).sum({1});
  sync({y1});
  Tensor y = (x + 7).sum({1});
  sync({y});
  EXPECT_TRUE(last_step().cache_hit);
}

TEST_F(Diagnostics, RecompileNamesScalarsAndStructure) {
  Tensor x = full({4}, 1.0f), xi = full({4}, int64_t{1});
  mark_step();
  metrics::clear_counters();
  compile_at("scalar site", xi + 1);
  std::string why = compile_at("scalar site", xi * 1.5);
  EXPECT_TRUE(has(why, "a host scalar of dtype float32 now, int64 before")) << why;
  EXPECT_EQ(counter("CompileCause:scalar"), 1);
  compile_at("new scalar site", x * 2);
  why = compile_at("new scalar site", x * 2 + 1);
  EXPECT_TRUE(has(why, "new scalar in the graph: 2 host scalars vs 1")) << why;
  EXPECT_EQ(counter("CompileCause:new_scalar"), 1);
  why = compile_at("new scalar site", (x * 2).exp());
  EXPECT_TRUE(has(why, "nodes vs ")) << why;
  EXPECT_TRUE(has(why, "added: exp")) << why;
  EXPECT_EQ(counter("CompileCause:structure"), 1);
  EXPECT_EQ(counter("CompileCause:first_compile"), 2);
}

TEST_F(Diagnostics, RecompileNamesDonationPattern) {
  Tensor w = full({8}, 1.0f);
  mark_step();
  Tensor keep = w.clone();  // shares w's buffer: the update cannot donate it
  w.add_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 0);
  keep = Tensor();
  w.add_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  const std::string why = last_step().compile_reason;
  EXPECT_TRUE(has(why, "donation pattern: buffer of tensor " + std::to_string(w.id()) +
                           " donated now, kept before ("))
      << why;
  EXPECT_EQ(counter("CompileCause:donation"), 1);
  EXPECT_EQ(w.to_vector<float>()[0], 3);
}

TEST_F(Diagnostics, RecompileAfterEvictionSaysSo) {
  Tensor x = full({3}, 1.0f);
  mark_step();
  metrics::clear_counters();
  compile_at("evict site", (x * 5).exp());
  clear_program_cache();
  std::string why = compile_at("evict site", (x * 5).exp());
  EXPECT_TRUE(has(why, "left the program cache")) << why;
  EXPECT_EQ(counter("CompileCause:evicted"), 1);
}

TEST_F(Diagnostics, WarnsOnceWhenCompilesKeepHappening) {
  ::testing::internal::CaptureStderr();
  for (int n = 1; n <= 14; ++n) {
    Tensor x = tensor<float>(std::vector<float>(2 * n, 1.0f), {n, 2});  // holds a buffer
    Tensor y = (x * 2).exp();
    mark_step();
    EXPECT_NEAR(y.to_vector<float>()[0], std::exp(2.0f), 1e-5);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(err, "compiles in the last 10 steps; causes: input_shape")) << err;
  EXPECT_EQ(err.find("compiles in the last"), err.rfind("compiles in the last")) << err;
  EXPECT_GE(counter("CompileCause:input_shape"), 10);
}

TEST_F(Diagnostics, DebugOutputGoesToTheDebugFile) {
  const std::string path = temp_path("debug.txt");
  ::unlink(path.c_str());
  setenv("LAZYX_DEBUG_FILE", path.c_str(), 1);
  set_debug(1);
  Tensor x = full({5}, 2.0f);
  mark_step();  // compiles: printed
  Tensor y = (x * 4).sum();
  {
    SyncCause cause("eval loop", {"train.py:12 in evaluate", "train.py:40 in main"});
    EXPECT_FLOAT_EQ(y.item<float>(), 40);
  }
  Tensor z = full({5}, 2.0f);
  mark_step();  // the same program as the first: cached, not printed
  set_debug(0);
  unsetenv("LAZYX_DEBUG_FILE");
  const std::string out = slurp(path);
  ::unlink(path.c_str());
  EXPECT_TRUE(has(out, ": user mark_step\n")) << out;
  EXPECT_TRUE(has(out, ": eval loop\n  graph ")) << out;
  EXPECT_TRUE(has(out, "1 inputs, 1 outputs, 0 donated")) << out;
  EXPECT_TRUE(has(out, "compiled because: first compile at this site")) << out;
  EXPECT_TRUE(has(out, "  at train.py:12 in evaluate\n     train.py:40 in main\n")) << out;
  size_t blocks = 0;
  for (size_t p = out.find("[lazyx]"); p != std::string::npos; p = out.find("[lazyx]", p + 1)) {
    ++blocks;
  }
  EXPECT_EQ(blocks, 2u) << out;
}

TEST_F(Diagnostics, UnwritableDebugFileIsAnErrorThatChangesNothing) {
  Tensor x = full({3}, 2.0f);
  mark_step();
  Tensor y = (x * 5).sum();
  setenv("LAZYX_DEBUG_FILE", "/nonexistent-lazyx-folder/debug.txt", 1);
  set_debug(1);
  expect_error([&] { (void)y.item<float>(); },
               {"[debug]", "LAZYX_DEBUG_FILE=/nonexistent-lazyx-folder/debug.txt"});
  EXPECT_TRUE(y.is_pending());
  unsetenv("LAZYX_DEBUG_FILE");
  ::testing::internal::CaptureStderr();
  EXPECT_FLOAT_EQ(y.item<float>(), 30);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(err, ": value read by item()\n")) << err;  // unset: stderr
}

TEST_F(Diagnostics, StrictModeRefusesSyncsOtherThanMarkStep) {
  Tensor x = full({4}, 1.5f);
  mark_step();
  Tensor y = (x * 2).sum();
  allow_sync(false);
  EXPECT_TRUE(sync_causes_wanted());
  {
    SyncCause cause("value read by item()", {"loop.py:7 in step"});
    expect_error([&] { (void)y.item<float>(); },
                 {"[item]", "allow_sync(false)", "value read by item()", "at loop.py:7 in step"});
  }
  expect_error([&] { sync({y}); }, {"[sync]", "partial sync"});
  EXPECT_TRUE(y.is_pending());  // nothing changed
  EXPECT_EQ(counter("StrictModeRefusedSync"), 2);
  mark_step();  // allowed
  EXPECT_FALSE(y.is_pending());
  EXPECT_FLOAT_EQ(y.item<float>(), 12);  // no work left: not a sync
  allow_sync(true);
}

TEST_F(Diagnostics, ProfileWritesChromeTraceEvents) {
  const std::string path = temp_path("trace.json");
  profile_begin(path);
  EXPECT_TRUE(profiling());
  expect_error([&] { profile_begin(path); }, {"[profile_begin]", "already recording"});
  Tensor a = randn({96, 96}), b = randn({96, 96});
  mark_step();
  Tensor c = (a.matmul(b) + 1).tanh();
  mark_step();
  (void)c.sum().item<float>();
  std::vector<float> host = c.to_vector<float>();
  profile_end();
  EXPECT_FALSE(profiling());
  expect_error([] { profile_end(); }, {"[profile_end]", "no profile"});
  const std::string j = slurp(path);
  ::unlink(path.c_str());
  EXPECT_EQ(j.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0), 0u);
  for (const char* name :
       {"\"tracing\"", "\"sync: user mark_step\"", "\"sync: value read by item()\"", "\"compile\"",
        "\"execute\"", "\"kernel ", "\"gemm 1x[96 x 96 x 96]\"", "\"to_host\"",
        "\"cause\": \"user mark_step\"", "\"ph\": \"X\""}) {
    EXPECT_TRUE(has(j, name)) << name << "\n" << j.substr(0, 2000);
  }
}
