// The persistent compile cache of the cpu backend: kernels compiled once are loaded from the
// folder by later programs (and processes), damaged entries are recompiled, the folder stays
// under its size cap, and an empty LAZYX_CACHE_DIR turns it off. Two processes at once:
// python/tests/test_persistent_cache.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;
namespace fs = std::filesystem;

namespace {

int64_t counter(const char* n) { return metrics::counter_value(n).value_or(0); }

// A fresh cache folder for one test, restoring the environment afterwards.
class CacheDir {
 public:
  CacheDir() {
    char tmpl[] = "/tmp/lazyx-pcache-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    if (const char* v = getenv("LAZYX_CACHE_DIR")) old_ = v;
    setenv("LAZYX_CACHE_DIR", dir_.c_str(), 1);
    set_backend("cpu");
    wait_for_background_compiles();  // nothing of earlier tests lands in this folder
    clear_program_cache();  // frees every compiled kernel of earlier tests
    metrics::clear_counters();
  }
  ~CacheDir() {
    wait_for_background_compiles();
    clear_program_cache();
    if (old_) {
      setenv("LAZYX_CACHE_DIR", old_->c_str(), 1);
    } else {
      unsetenv("LAZYX_CACHE_DIR");
    }
    unsetenv("LAZYX_CACHE_MAX_MB");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> r;
    std::error_code ec;
    for (fs::directory_iterator it(fs::path(dir_) / "cpu", ec), end; !ec && it != end; ++it) {
      if (it->path().extension() == ".lzk") r.push_back(it->path());
    }
    std::sort(r.begin(), r.end());
    return r;
  }
  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& p : entries()) b += static_cast<int64_t>(fs::file_size(p));
    return b;
  }

 private:
  std::string dir_;
  std::optional<std::string> old_;
};

// A program of a few distinct kernels (elementwise, a reduction, a softmax).
std::vector<std::vector<float>> run_program(float scale) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  mark_step();
  Tensor a = (x * scale + 1).tanh();
  Tensor b = (x - 2).exp().sum({1});
  Tensor c = x.softmax(1);
  sync({a, b, c});
  // New kernels run at the quick tier and are stored once recompiled at the full one.
  wait_for_background_compiles();
  return {a.to_vector<float>(), b.to_vector<float>(), c.to_vector<float>()};
}

}  // namespace

TEST(PersistentCache, LaterProgramsLoadKernelsInsteadOfCompiling) {
  CacheDir cache;
  auto first = run_program(0.5f);
  const int64_t compiled = counter("CpuKernelCompiled");
  EXPECT_GE(compiled, 3);
  EXPECT_EQ(counter("PersistentCacheMiss"), compiled);
  EXPECT_EQ(counter("PersistentCacheHit"), 0);
  EXPECT_EQ(static_cast<int64_t>(cache.entries().size()), compiled);
  // The programs and their kernels are gone: the next compile loads every kernel from disk,
  // with other scalars (run-time operands) and the same results as a fresh compile.
  clear_program_cache();
  metrics::clear_counters();
  auto second = run_program(0.5f);
  EXPECT_EQ(counter("CpuKernelCompiled"), 0);
  EXPECT_EQ(counter("PersistentCacheHit"), compiled);
  EXPECT_EQ(counter("PersistentCacheMiss"), 0);
  EXPECT_EQ(second, first);
  clear_program_cache();
  auto other = run_program(-1.5f);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(other[0][i], std::tanh((i + 1) * -1.5f + 1), 1e-6);
  EXPECT_EQ(counter("CpuKernelCompiled"), 0);
}

TEST(PersistentCache, DamagedEntriesAreDeletedAndRecompiled) {
  CacheDir cache;
  auto want = run_program(2.0f);
  auto files = cache.entries();
  ASSERT_GE(files.size(), 3u);
  // Truncated, one byte flipped in the object, and emptied.
  fs::resize_file(files[0], fs::file_size(files[0]) / 2);
  {
    std::fstream f(files[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  fs::resize_file(files[2], 0);
  clear_program_cache();
  metrics::clear_counters();
  auto got = run_program(2.0f);
  EXPECT_EQ(got, want);
  EXPECT_EQ(counter("PersistentCacheCorrupt"), 3);
  EXPECT_EQ(counter("CpuKernelCompiled"), 3);
  EXPECT_EQ(counter("PersistentCacheHit"), static_cast<int64_t>(files.size()) - 3);
  // The recompiled kernels were stored again, whole.
  clear_program_cache();
  metrics::clear_counters();
  EXPECT_EQ(run_program(2.0f), want);
  EXPECT_EQ(counter("CpuKernelCompiled"), 0);
  EXPECT_EQ(counter("PersistentCacheCorrupt"), 0);
}

TEST(PersistentCache, FolderStaysUnderItsCapByLeastRecentUse) {
  CacheDir cache;
  run_program(1.0f);
  const int64_t per_program = cache.bytes();
  ASSERT_GT(per_program, 0);
  // A cap of about two programs' kernels; then programs of other shapes compile new kernels.
  const double cap_mb = 2.0 * static_cast<double>(per_program) / 1048576.0;
  setenv("LAZYX_CACHE_MAX_MB", std::to_string(cap_mb).c_str(), 1);
  const int64_t cap = static_cast<int64_t>(cap_mb * 1048576.0);
  for (int n = 5; n < 15; ++n) {
    Tensor x = full({n, n + 1}, 0.25f);
    mark_step();
    Tensor y = (x * 2 + 1).exp().sum({1});
    sync({y});
    wait_for_background_compiles();
    EXPECT_NEAR(y.to_vector<float>()[0], (n + 1) * std::exp(1.5f), 1e-3);
    EXPECT_LE(cache.bytes(), cap) << n;
  }
  EXPECT_GE(counter("PersistentCacheEvicted"), 1);
  // The most recent program's kernel is still there (the fill kernel every step shared in
  // memory was written first, and may have been evicted).
  clear_program_cache();
  Tensor x = full({14, 15}, 0.25f);
  mark_step();
  metrics::clear_counters();
  Tensor y = (x * 2 + 1).exp().sum({1});
  sync({y});
  EXPECT_EQ(counter("CpuKernelCompiled"), 0);
  EXPECT_EQ(counter("PersistentCacheHit"), 1);
}

TEST(PersistentCache, EmptyFolderNameTurnsItOff) {
  CacheDir cache;
  setenv("LAZYX_CACHE_DIR", "", 1);
  run_program(3.0f);
  EXPECT_GE(counter("CpuKernelCompiled"), 3);
  EXPECT_EQ(counter("PersistentCacheHit") + counter("PersistentCacheMiss"), 0);
  EXPECT_TRUE(cache.entries().empty());
}

TEST(PersistentCache, InvalidCapIsAnError) {
  CacheDir cache;
  setenv("LAZYX_CACHE_MAX_MB", "lots", 1);
  Tensor x = tensor<float>({1, 2, 3}, {3});
  mark_step();
  Tensor y = (x * 7 + 1).tanh();
  try {
    sync({y});
    ADD_FAILURE() << "expected lazyx::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LAZYX_CACHE_MAX_MB=lots"), std::string::npos) << e.what();
  }
  unsetenv("LAZYX_CACHE_MAX_MB");
  EXPECT_NEAR(y.to_vector<float>()[2], std::tanh(22.0f), 1e-6);  // nothing changed meanwhile
}
