// LAZYX_* environment variables: an invalid value raises lazyx::Error naming the variable, at
// the first call that reads it, and that call changes nothing.
#include <cstdlib>
#include <thread>

#include "runtime/env.h"
#include "test_util.h"

namespace lazyx {
namespace {

using testing::expect_error;
using testing::expect_floats;
using testing::materialized;

// Sets a variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};


// First in this file: the cache and the thread pool read their variable once, on first use.
TEST(Env, CacheSizeInvalidRaisesThenWorks) {
  set_backend("reference");
  Tensor x = materialized({1, 2}, {2});
  x.add_(1);
  {
    ScopedEnv e("LAZYX_COMPILATION_CACHE_SIZE", "lots");
    expect_error([] { mark_step(); }, {"LAZYX_COMPILATION_CACHE_SIZE", "'lots'", "integer"});
  }
  {
    ScopedEnv e("LAZYX_COMPILATION_CACHE_SIZE", "0");
    expect_error([] { mark_step(); }, {"LAZYX_COMPILATION_CACHE_SIZE", "'0'"});
  }
  mark_step();
  expect_floats(x, {2, 3});
}

#ifdef LAZYX_TEST_HAVE_CPU  // the cpu backend's variables, where it is built
TEST(Env, NumThreadsInvalidRaisesThenWorks) {
  set_backend("reference");
  Tensor x = materialized({1, 2}, {2});
  x.mul_(3);
  {
    ScopedEnv e("LAZYX_NUM_THREADS", "two");
    expect_error([] { set_backend("cpu"); }, {"LAZYX_NUM_THREADS", "'two'", "1 to 1024"});
  }
  EXPECT_EQ(backend_name(), "reference");  // the failed switch changed nothing
  set_backend("cpu");
  x.add_(1);
  mark_step();
  expect_floats(x, {4, 7});
  set_backend("reference");
}

// Read at backend creation and at every program run: an invalid value fails either before
// anything changes.
TEST(Env, AdaptiveThreadsInvalidRaisesAtSyncThenWorks) {
  set_backend("reference");
  {
    ScopedEnv e("LAZYX_ADAPTIVE_THREADS", "sometimes");
    expect_error([] { set_backend("cpu"); }, {"LAZYX_ADAPTIVE_THREADS", "'sometimes'"});
  }
  EXPECT_EQ(backend_name(), "reference");  // the failed switch changed nothing
  set_backend("cpu");
  Tensor x = materialized({1, 2}, {2});
  x.mul_(3);
  {
    ScopedEnv e("LAZYX_ADAPTIVE_THREADS", "maybe");
    expect_error([] { mark_step(); }, {"LAZYX_ADAPTIVE_THREADS", "'maybe'"});
  }
  x.add_(1);
  mark_step();
  expect_floats(x, {4, 7});
  {
    ScopedEnv e("LAZYX_ADAPTIVE_THREADS", "0");
    x.add_(1);
    mark_step();
    expect_floats(x, {5, 8});
  }
  set_backend("reference");
}
#endif

// The generation moves when the environment changes and is never shared by two threads, so a
// value cached against it cannot be taken for another thread's.
TEST(Env, GenerationMovesOnChangeAndDiffersBetweenThreads) {
  const uint64_t g0 = env::generation();
  EXPECT_EQ(env::generation(), g0);
  uint64_t other = 0;
  std::thread([&] { other = env::generation(); }).join();
  EXPECT_NE(other, g0);
  {
    ScopedEnv e("LAZYX_TEST_GENERATION", "1");
    EXPECT_NE(env::generation(), g0);
  }
}

TEST(Env, FlagsParse) {
  {
    ScopedEnv e("LAZYX_TEST_FLAG", "On");
    EXPECT_TRUE(env::flag("LAZYX_TEST_FLAG", false));
  }
  {
    ScopedEnv e("LAZYX_TEST_FLAG", "0");
    EXPECT_FALSE(env::flag("LAZYX_TEST_FLAG", true));
  }
  EXPECT_TRUE(env::flag("LAZYX_TEST_FLAG", true));  // unset: the default
  ScopedEnv e("LAZYX_TEST_FLAG", "maybe");
  expect_error([] { env::flag("LAZYX_TEST_FLAG", false); }, {"[env] LAZYX_TEST_FLAG='maybe'"});
}

// Reads see every change of the environment (set, reset to another value, unset, putenv),
// although they keep the LAZYX_* entries between changes; inside a Snapshot they are fixed.
TEST(Env, EveryChangeIsSeen) {
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 5);
  setenv("LAZYX_TEST_INT", "7", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 7);
  setenv("LAZYX_TEST_INT", "8", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 8);
  setenv("LAZYX_TEST_INT", "7", 1);  // a value set before: glibc may hand back the old string
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 7);
  static char entry[] = "LAZYX_TEST_INT=9";
  putenv(entry);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 9);
  {
    env::Snapshot once;
    setenv("LAZYX_TEST_OTHER", "1", 1);
    EXPECT_FALSE(env::flag("LAZYX_TEST_OTHER", false));  // the view of the Snapshot's start
  }
  EXPECT_TRUE(env::flag("LAZYX_TEST_OTHER", false));
  unsetenv("LAZYX_TEST_OTHER");
  unsetenv("LAZYX_TEST_INT");
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 5);
  EXPECT_FALSE(env::flag("LAZYX_TEST_OTHER", false));
}

// Changes elsewhere in the environment move the LAZYX_* entries (unsetenv shifts the entries
// after the removed one down, setenv appends, often into the same array): reads still see them.
TEST(Env, ChangesAroundTheEntriesAreSeen) {
  setenv("LAZYX_TEST_OTHER_BEFORE", "1", 1);
  setenv("NOT_LAZYX_TEST_1", "1", 1);
  setenv("LAZYX_TEST_INT", "3", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 3);
  unsetenv("NOT_LAZYX_TEST_1");        // LAZYX_TEST_INT moves down one slot
  setenv("NOT_LAZYX_TEST_2", "1", 1);  // and the count is as before
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 3);
  unsetenv("LAZYX_TEST_OTHER_BEFORE");  // moves it again; then its own value changes
  setenv("LAZYX_TEST_INT", "4", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 4);
  EXPECT_FALSE(env::flag("LAZYX_TEST_OTHER_BEFORE", false));
  unsetenv("LAZYX_TEST_INT");  // removed, and another variable appended in its place
  setenv("NOT_LAZYX_TEST_3", "1", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 5);
  unsetenv("NOT_LAZYX_TEST_3");  // the last entry removed, a LAZYX_* one appended
  setenv("LAZYX_TEST_INT", "6", 1);
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 6);
  unsetenv("LAZYX_TEST_INT");
  unsetenv("NOT_LAZYX_TEST_2");
  EXPECT_EQ(env::integer("LAZYX_TEST_INT", 5, 0, 100), 5);
}

TEST(Env, AliasingFlagInvalidRaisesAndChangesNothing) {
  set_backend("reference");
  Tensor x = materialized({1, 2}, {2});
  mark_step();
  x.mul_(2);
  {
    ScopedEnv e("LAZYX_ENABLE_PARAM_ALIASING", "sometimes");
    expect_error([] { mark_step(); }, {"LAZYX_ENABLE_PARAM_ALIASING", "'sometimes'", "1 or 0"});
  }
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);  // the failed step left x's chain as it was
  expect_floats(x, {2, 4});
}

TEST(Env, DebugLevelOutOfRangeRaises) {
  set_backend("reference");
  Tensor x = materialized({1, 2}, {2});
  x.add_(5);
  {
    ScopedEnv e("LAZYX_DEBUG", "3");
    expect_error([&] { (void)x.to_vector<float>(); }, {"LAZYX_DEBUG", "'3'", "0 to 2"});
  }
  expect_floats(x, {6, 7});
}

#ifdef LAZYX_TEST_HAVE_CPU
TEST(Env, CpuSwitchInvalidRaises) {
  set_backend("cpu");
  Tensor x = materialized({1, 2, 3}, {3});
  Tensor y = x.slice(0, 0, 2);
  y.add_(1);
  {
    ScopedEnv e("LAZYX_CPU_NO_VIEW_FUSION", "x");
    expect_error([] { mark_step(); }, {"LAZYX_CPU_NO_VIEW_FUSION", "'x'"});
  }
  expect_floats(x, {2, 3, 3});
  set_backend("reference");
}
#endif

}  // namespace
}  // namespace lazyx
