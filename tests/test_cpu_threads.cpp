// The cpu backend's one thread runtime: the pool's parallel_for (every index once, errors
// rethrown, nested calls inline), GEMMs partitioned across the pool with single-threaded library
// calls (awkward sizes, transposed operands, alpha/beta, batches) against a float64 loop and the
// reference backend, no library threads started, and LAZYX_NUM_THREADS validation. CTest runs
// this file with LAZYX_NUM_THREADS=3, so partitions are uneven even on two cores.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/core_budget.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/load_monitor.h"
#include "backends/cpu/thread_pool.h"
#include "lazyx/diagnostics.h"
#include "lazyx/lazyx.h"
#include "lazyx/metrics.h"
#include "test_util.h"

namespace lazyx {
namespace {

using cpu::GemmOperand;
using cpu::LoadMonitor;
using cpu::ThreadPool;

std::vector<float> randoms(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// The names of the process's threads.
std::vector<std::string> thread_names() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(f, name);
      out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

// Threads not started by lazyx (whose own are named lazyx-pool and lazyx-compile; the background
// compiler starts with the first quick-tier kernel, which depends on the compile cache).
int count_foreign_threads() {
  int n = 0;
  for (const std::string& name : thread_names()) n += name.rfind("lazyx-", 0) != 0;
  return n;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Tensor make(const Shape& s, Dtype d, uint32_t seed) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  std::vector<float> v = randoms(n, seed);
  return tensor<float>(v, s).to(d);
}

TEST(CpuThreads, GemmsStartNoLibraryThreads) {
  // The pool exists once the backend does; then a large float32 and float64 GEMM must not add
  // OpenMP or OpenBLAS threads. First in the file: the process's first GEMMs.
  set_backend("cpu");
  Tensor w = make({512, 512}, kFloat32, 16);
  Tensor y = (w * 2).sum();
  y.item<float>();
  const int before = count_foreign_threads();
  const std::string names = joined(thread_names());
  Tensor p = make({384, 512}, kFloat32, 17).matmul(w);
  Tensor q = make({200, 300}, kFloat64, 18).matmul(make({300, 200}, kFloat64, 19));
  sync({p, q});
  EXPECT_LE(count_foreign_threads(), before)
      << "a GEMM started threads outside the pool: before [" << names << "], after ["
      << joined(thread_names()) << "]";
}

TEST(CpuThreads, ParallelForCoversEveryIndexOnce) {
  ThreadPool& pool = ThreadPool::get();
  for (int64_t n : {1, 7, 64, 1000, 100003}) {
    for (int64_t grain : {1, 16, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, grain, 0, [&](int64_t b, int64_t e) {
        EXPECT_TRUE(b % grain == 0) << "chunk start " << b << " not a multiple of " << grain;
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain << " index " << i;
      }
    }
  }
}

TEST(CpuThreads, ParallelForRethrowsAndRunsNestedCallsInline) {
  ThreadPool& pool = ThreadPool::get();
  EXPECT_THROW(pool.parallel_for(1000, 1, 0,
                                 [](int64_t b, int64_t e) {
                                   if (b <= 500 && 500 < e) throw std::runtime_error("chunk");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(64, 1, 0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(10, 1, 0, [&](int64_t b2, int64_t e2) { sum += (e2 - b2) * i; });
    }
  });
  EXPECT_EQ(sum.load(), 10 * (63 * 64 / 2));
  // The pool still works after the error.
  std::atomic<int64_t> count{0};
  pool.parallel_for(100000, 64, 0, [&](int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 100000);
}

// Jobs with alternating chunk counts back to back, every index once. (A worker preempted while
// reading the previous job's claim word once took a chunk of it against the next job's bounds:
// a benchmark hung after minutes. This stress test runs that path; it cannot force the rare
// interleaving.)
TEST(CpuThreads, BackToBackJobsOfDifferentSizesNeverMixUp) {
  ThreadPool& pool = ThreadPool::get();
  std::vector<int> hits(4096);
  for (int iter = 0; iter < 20000; ++iter) {
    const int64_t n = iter % 2 ? 4096 : 2 + iter % 7;
    pool.parallel_for(n, 1, 0, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "job " << iter << " index " << i;
      hits[static_cast<size_t>(i)] = 0;
    }
  }
}

TEST(CpuThreads, GemmBlocksTileEveryDimension) {
  for (int64_t size : {1, 7, 8, 9, 100, 257, 1000}) {
    for (int64_t pieces : {1, 2, 3, 5, 8}) {
      for (int64_t align : {8, 16}) {
        int64_t next = 0;
        for (int64_t p = 0; p < pieces; ++p) {
          auto [b, e] = cpu::gemm_block(size, pieces, p, align);
          EXPECT_EQ(b, next) << size << " " << pieces << " " << p;
          EXPECT_LE(b, e);
          if (b < e) {
            EXPECT_EQ(b % align, 0);
          }
          next = e;
        }
        EXPECT_EQ(next, size) << size << " " << pieces;
      }
    }
  }
  // Small GEMMs stay on the calling thread; batches split first; single matrices by rows or
  // columns, whichever duplicates the smaller operand.
  EXPECT_FALSE(cpu::gemm_partition(1, 64, 64, 64, 2).parallel);
  EXPECT_FALSE(cpu::gemm_partition(1, 1024, 1024, 1024, 1).parallel);
  cpu::GemmPartition b = cpu::gemm_partition(64, 256, 256, 64, 2);
  EXPECT_TRUE(b.parallel);
  EXPECT_EQ(b.pieces, 1);
  cpu::GemmPartition r = cpu::gemm_partition(1, 784, 512, 256, 2);
  EXPECT_TRUE(r.parallel);
  EXPECT_TRUE(r.by_rows);
  EXPECT_GT(r.pieces, 1);
  cpu::GemmPartition c = cpu::gemm_partition(1, 256, 784, 512, 2);
  EXPECT_TRUE(c.parallel);
  EXPECT_FALSE(c.by_rows);
}

// out = alpha * op(a) @ op(b) + beta * out in double, for a batch of matrices.
std::vector<double> gemm_f64(int64_t nb, int64_t n, int64_t m, int64_t k,
                             const std::vector<float>& a, char ta, int64_t lda, int64_t sa,
                             const std::vector<float>& b, char tb, int64_t ldb, int64_t sb,
                             const std::vector<float>& out0, float alpha, float beta) {
  std::vector<double> out(out0.begin(), out0.end());
  for (int64_t bi = 0; bi < nb; ++bi) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = a[bi * sa + (ta == 'T' ? p * lda + i : i * lda + p)];
          double y = b[bi * sb + (tb == 'T' ? j * ldb + p : p * ldb + j)];
          acc += x * y;
        }
        double& o = out[(bi * n + i) * m + j];
        o = alpha * acc + (beta == 0 ? 0.0 : beta * o);
      }
    }
  }
  return out;
}

TEST(CpuThreads, PartitionedSgemmMatchesFloat64Loop) {
  struct Case {
    int64_t nb, n, m, k;
    char ta, tb;
    float alpha, beta;
    int threads;
  };
  const std::vector<Case> cases = {
      {1, 257, 131, 67, 'N', 'N', 1, 0, 2},    {1, 257, 131, 67, 'N', 'N', 1, 0, 3},
      {1, 61, 530, 97, 'T', 'N', -0.5f, 1, 2}, {1, 531, 45, 300, 'N', 'T', 2, 0.5f, 5},
      {3, 129, 77, 80, 'T', 'T', 1, 0, 2},     {5, 100, 260, 33, 'N', 'T', 1, 1, 3},
      {7, 9, 1000, 150, 'N', 'N', 1, 0, 4},    {1, 1000, 9, 700, 'T', 'N', 1, 0, 2},
  };
  for (const Case& c : cases) {
    const int64_t pad = 3;  // leading dimensions larger than the matrix
    const int64_t ar = c.ta == 'T' ? c.k : c.n, ac = c.ta == 'T' ? c.n : c.k;
    const int64_t br = c.tb == 'T' ? c.m : c.k, bc = c.tb == 'T' ? c.k : c.m;
    const int64_t lda = ac + pad, ldb = bc + pad, sa = ar * lda + 5, sb = br * ldb + 2;
    std::vector<float> a = randoms(c.nb * sa, 1), b = randoms(c.nb * sb, 2),
                       out = randoms(c.nb * c.n * c.m, 3);
    std::vector<double> want =
        gemm_f64(c.nb, c.n, c.m, c.k, a, c.ta, lda, sa, b, c.tb, ldb, sb, out, c.alpha, c.beta);
    GemmOperand ao, bo;
    ao.trans = c.ta;
    ao.ld = lda;
    ao.batch = {sa};
    bo.trans = c.tb;
    bo.ld = ldb;
    bo.batch = {sb};
    ASSERT_TRUE(cpu::gemm_partition(c.nb, c.n, c.m, c.k, c.threads).parallel);
    cpu::gemm_matmul_views({c.nb}, c.n, c.m, c.k, a.data(), ao, b.data(), bo, out.data(), c.alpha,
                           c.beta, c.threads);
    int bad = 0;
    for (size_t i = 0; i < want.size() && bad < 5; ++i) {
      if (std::fabs(out[i] - want[i]) > 1e-4 * (1 + std::sqrt(c.k) + std::fabs(want[i]))) {
        ADD_FAILURE() << "case " << c.nb << "x" << c.n << "x" << c.m << "x" << c.k << " " << c.ta
                      << c.tb << " threads " << c.threads << " at " << i << ": " << out[i]
                      << " want " << want[i];
        bad++;
      }
    }
  }
}

// Builds on both backends and compares every value.
void check_against_reference(const std::string& what, const std::function<Tensor()>& build) {
  set_backend("reference");
  Tensor r = build();
  std::vector<double> want = r.to_vector<double>();
  set_backend("cpu");
  Tensor c = build();
  std::vector<double> got = c.to_vector<double>();
  ASSERT_EQ(c.shape(), r.shape()) << what;
  const double tol = c.dtype() == kFloat64 ? 1e-11 : 2e-5;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (std::fabs(got[i] - want[i]) > tol * std::max(1.0, std::fabs(want[i]))) {
      ADD_FAILURE() << what << " at " << i << ": cpu " << got[i] << " reference " << want[i];
      bad++;
    }
  }
}

TEST(CpuThreads, LargeMatmulsMatchReference) {
  for (Dtype d : {kFloat32, kFloat64}) {
    const std::string dn = dtype_name(d);
    check_against_reference("matmul 259x97 @ 97x133 " + dn, [&] {
      return make({259, 97}, d, 4).matmul(make({97, 133}, d, 5));
    });
    check_against_reference("matmul 45x300 @ 300x531 " + dn, [&] {
      return make({45, 300}, d, 6).matmul(make({300, 531}, d, 7));
    });
    check_against_reference("batched 5x70x90 @ 90x130 " + dn, [&] {
      return make({5, 70, 90}, d, 8).matmul(make({90, 130}, d, 9));
    });
    check_against_reference("broadcast 2x1x100x64 @ 3x64x120 " + dn, [&] {
      return make({2, 1, 100, 64}, d, 10).matmul(make({3, 64, 120}, d, 11));
    });
  }
  check_against_reference("q @ k^T 3x2x130x40", [] {
    Tensor q = make({3, 2, 130, 40}, kFloat32, 12), k = make({3, 2, 131, 40}, kFloat32, 13);
    return q.matmul(k.transpose(-2, -1));
  });
  check_against_reference("x^T @ dz 300x257", [] {
    return make({257, 300}, kFloat32, 14).t().matmul(make({257, 129}, kFloat32, 15));
  });
}

TEST(LoadMonitor, WidthFollowsFreeCoresWithHysteresis) {
  EXPECT_EQ(LoadMonitor::next_width(2, 2.0, 2), 2);  // quiet
  EXPECT_EQ(LoadMonitor::next_width(2, 1.0, 2), 1);  // one core busy elsewhere
  EXPECT_EQ(LoadMonitor::next_width(2, 1.5, 2), 2);  // half a core: no flip either way
  EXPECT_EQ(LoadMonitor::next_width(1, 1.5, 2), 1);
  EXPECT_EQ(LoadMonitor::next_width(1, 1.9, 2), 2);
  EXPECT_EQ(LoadMonitor::next_width(1, 0.0, 2), 1);  // never below the caller
  EXPECT_EQ(LoadMonitor::next_width(4, 0.2, 4), 1);
  EXPECT_EQ(LoadMonitor::next_width(1, 3.9, 4), 4);
  EXPECT_EQ(LoadMonitor::next_width(4, 2.9, 4), 3);
  EXPECT_EQ(LoadMonitor::next_width(3, 2.0, 3), 2);  // more threads than cores: as many as cores
  EXPECT_EQ(LoadMonitor::next_width(2, 8.0, 2), 2);  // never above the pool
}

TEST(LoadMonitor, ParsesTheCoresOfProcStat) {
  const std::string text =
      "cpu  900 0 90 5000 10 0 0 0 0 0\n"
      "cpu0 100 5 20 1000 3 1 2 7 0 0\n"
      "cpu1 300 0 30 2000 4 0 0 0 0 0\n"
      "cpu2 500 0 40 2000 3 0 0 0 0 0\n"
      "intr 12345 0 1 2\n"
      "ctxt 999\n";
  uint64_t busy = 0, total = 0;
  ASSERT_TRUE(LoadMonitor::parse_stat(text, {0, 2}, busy, total));
  EXPECT_EQ(total, (100 + 5 + 20 + 1000 + 3 + 1 + 2 + 7) + (500 + 40 + 2000 + 3));
  EXPECT_EQ(busy, (100 + 5 + 20 + 1 + 2 + 7) + (500 + 40));  // steal is busy; iowait is not
  EXPECT_FALSE(LoadMonitor::parse_stat(text, {0, 5}, busy, total)) << "cpu5 is missing";
}

// Processes that spin on every core make the pool run chunks on the caller alone (the chunks are
// the same, so results are too); with adaptation off, the workers take chunks again.
TEST(CpuThreads, PoolRunsOnTheCallerBesideBusyProcesses) {
  ThreadPool& pool = ThreadPool::get();
  ASSERT_GE(pool.size(), 2);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<pid_t> kids;
  for (long c = 0; c < cores; ++c) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(30);  // never outlive a crashed test
      for (;;) asm volatile("");
    }
    ASSERT_GT(pid, 0);
    kids.push_back(pid);
  }
  // Chunks run by a thread other than the caller, in one large parallel_for.
  auto foreign_chunks = [&] {
    const auto me = std::this_thread::get_id();
    std::atomic<int> foreign{0};
    pool.parallel_for(1 << 16, 64, 0, [&](int64_t b, int64_t e) {
      volatile double x = 0;
      for (int64_t i = b; i < e; ++i) x = x + static_cast<double>(i);
      if (std::this_thread::get_id() != me) foreign++;
    });
    return foreign.load();
  };
  pool.set_adaptive(true);
  const std::string log = ::testing::TempDir() + "lazyx_pool_debug.txt";
  std::remove(log.c_str());
  setenv("LAZYX_DEBUG_FILE", log.c_str(), 1);
  set_debug(1);
  const int64_t narrowed0 = metrics::counter_value("CpuPoolNarrowed").value_or(0);
  const auto start = std::chrono::steady_clock::now();
  while (metrics::counter_value("CpuPoolNarrowed").value_or(0) == narrowed0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    foreign_chunks();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(metrics::counter_value("CpuPoolNarrowed").value_or(0), narrowed0)
      << "the pool kept all threads while " << cores << " processes spun";
  set_debug(0);
  unsetenv("LAZYX_DEBUG_FILE");
  std::ifstream in(log);
  const std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(logged.find("the thread pool runs 1 thread: other processes keep"), std::string::npos)
      << "debug output: " << logged;
  int foreign = 0;
  for (int i = 0; i < 20; ++i) foreign += foreign_chunks();
  EXPECT_EQ(foreign, 0) << "narrowed to the caller, yet workers ran chunks";
  pool.set_adaptive(false);
  foreign = 0;
  for (int i = 0; i < 2000 && foreign == 0; ++i) foreign += foreign_chunks();
  EXPECT_GT(foreign, 0) << "with adaptation off, no worker ran a chunk";
  for (pid_t pid : kids) kill(pid, SIGKILL);
  for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  pool.set_adaptive(true);
}

// set_num_threads caps the threads at once (the caller alone at 1) and keeps the chunks, so a
// split sum gives the same bits; out-of-range counts are errors that change nothing.
TEST(CpuThreads, SetNumThreadsCapsThreadsNotResults) {
  set_backend("cpu");
  ThreadPool& pool = ThreadPool::get();
  ASSERT_EQ(get_max_threads(), pool.size());
  ASSERT_EQ(get_num_threads(), pool.size());
  testing::expect_error([] { set_num_threads(0); }, {"[set_num_threads]", "0 threads", "1 to"});
  testing::expect_error([&] { set_num_threads(pool.size() + 1); },
                        {"[set_num_threads]", "LAZYX_NUM_THREADS"});
  EXPECT_EQ(get_num_threads(), pool.size());
  const std::vector<float> v = randoms(1 << 20, 21);
  auto total = [&] {
    Tensor x = testing::materialized(v, {1 << 20});
    Tensor s = x.sum();
    sync({s});
    return s.to_vector<float>()[0];
  };
  const float wide = total();
  pool.set_adaptive(false);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  const auto me = std::this_thread::get_id();
  std::atomic<int> foreign{0};
  for (int i = 0; i < 200; ++i) {
    pool.parallel_for(1 << 16, 64, 0, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != me) foreign++;
    });
  }
  EXPECT_EQ(foreign.load(), 0) << "set_num_threads(1), yet workers ran chunks";
  const float narrow = total();
  set_num_threads(pool.size());
  pool.set_adaptive(true);
  EXPECT_EQ(std::memcmp(&wide, &narrow, sizeof(float)), 0) << wide << " vs " << narrow;
}

TEST(CoreBudget, ParsesCgroupQuotas) {
  EXPECT_EQ(cpu::quota_cores_v2("max 100000\n"), std::nullopt);
  EXPECT_EQ(cpu::quota_cores_v2("50000 100000\n"), 1);  // half a core: one thread
  EXPECT_EQ(cpu::quota_cores_v2("150000 100000"), 2);   // rounded up
  EXPECT_EQ(cpu::quota_cores_v2("400000 100000"), 4);
  EXPECT_EQ(cpu::quota_cores_v2("garbage"), std::nullopt);
  EXPECT_EQ(cpu::quota_cores_v1(-1, 100000), std::nullopt);
  EXPECT_EQ(cpu::quota_cores_v1(250000, 100000), 3);
}

// A cgroup tree laid out under a temporary root, as /sys/fs/cgroup would be.
TEST(CoreBudget, FindsTheQuotaOfTheProcessCgroup) {
  const std::string root = ::testing::TempDir() + "lazyx_cgroup_" + std::to_string(getpid());
  auto write = [&](const std::string& rel, const std::string& text) {
    const std::string path = root + rel;
    ASSERT_EQ(std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str()), 0);
    std::ofstream(path) << text;
  };
  write("/self_v2", "0::/job/a\n");
  write("/job/a/cpu.max", "200000 100000\n");
  EXPECT_EQ(cpu::cgroup_quota_cores(root, root + "/self_v2"), 2);
  write("/self_v1", "4:memory:/x\n2:cpu,cpuacct:/docker/c1\n");
  write("/cpu,cpuacct/docker/c1/cpu.cfs_quota_us", "150000\n");
  write("/cpu,cpuacct/docker/c1/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cpu::cgroup_quota_cores(root, root + "/self_v1"), 2);
  write("/self_none", "1:cpu:/free\n");
  write("/cpu/free/cpu.cfs_quota_us", "-1\n");
  write("/cpu/free/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cpu::cgroup_quota_cores(root, root + "/self_none"), std::nullopt);
  EXPECT_EQ(cpu::cgroup_quota_cores(root, root + "/missing"), std::nullopt);
  std::system(("rm -rf '" + root + "'").c_str());
  EXPECT_GE(cpu::core_budget(), 1);
  EXPECT_LE(cpu::core_budget(), static_cast<int>(cpu::allowed_cpus().size()));
}

TEST(CpuThreads, InvalidThreadCountIsAnError) {
  const char* old = std::getenv("LAZYX_NUM_THREADS");
  const std::string saved = old ? old : "";
  for (const char* bad : {"abc", "0", "-2", "2x", "100000"}) {
    setenv("LAZYX_NUM_THREADS", bad, 1);
    testing::expect_error([] { cpu::default_num_threads(); },
                          {"LAZYX_NUM_THREADS", std::string("'") + bad + "'"});
  }
  setenv("LAZYX_NUM_THREADS", "3", 1);
  EXPECT_EQ(cpu::default_num_threads(), 3);
  if (old) {
    setenv("LAZYX_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("LAZYX_NUM_THREADS");
  }
}

}  // namespace
}  // namespace lazyx
