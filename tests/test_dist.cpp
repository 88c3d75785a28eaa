// lazyx::dist: ranks forked from the test share a file store (or a TCP store); each checks every
// collective against values it computes itself from the inputs all ranks use.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "lazyx/dist.h"
#include "lazyx/lazyx.h"

namespace lazyx {
namespace {

std::string fresh_dir() {
  char tmpl[] = "/tmp/lazyx_dist_XXXXXX";
  char* d = mkdtemp(tmpl);
  if (!d) std::abort();
  return d;
}

// Forks `n` ranks running body(rank); returns their exit codes (-1: killed after `limit_s`).
// Nothing of lazyx runs in the parent, so the children fork from a single-threaded process.
std::vector<int> run_ranks(int n, const std::function<int(int)>& body, double limit_s = 60) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t p = fork();
    if (p == 0) {
      setenv("LAZYX_NUM_THREADS", "1", 1);
      int rc = 1;
      try {
        rc = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: unexpected exception: %s\n", r, e.what());
        rc = 3;
      }
      std::fflush(stderr);
      _exit(rc);
    }
    pids.push_back(p);
  }
  std::vector<int> codes(n, -2);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (codes[r] != -2) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        --left;
      }
    }
    if (left && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (codes[r] == -2) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          codes[r] = -1;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

#define RANK_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

bool near(double a, double b, double tol = 1e-5) { return std::abs(a - b) <= tol * (1 + std::abs(b)); }

// Rank r's inputs: x (float32 [2, 3]), y (float64 [5]), z (int64 [4]).
float xin(int r, int i) { return static_cast<float>((i + 1) * (r + 1)) * 0.5f - static_cast<float>(r); }
double yin(int r, int i) { return 1.0 / (i + 1 + r) + r; }
int64_t zin(int r, int i) { return (i * 7 + r * 3) % 5 - 2; }

int all_collectives(int rank, int world, const std::string& dir, const std::string& backend) {
  set_backend(backend);
  dist::init(rank, world, dist::Store::file(dir));
  RANK_CHECK(dist::rank() == rank && dist::world_size() == world);
  std::vector<float> xv(6);
  std::vector<double> yv(5);
  std::vector<int64_t> zv(4);
  for (int i = 0; i < 6; ++i) xv[i] = xin(rank, i);
  for (int i = 0; i < 5; ++i) yv[i] = yin(rank, i);
  for (int i = 0; i < 4; ++i) zv[i] = zin(rank, i);
  Tensor x = tensor<float>(xv, {2, 3}), y = tensor<double>(yv, {5}), z = tensor<int64_t>(zv, {4});
  // The operands are lazy results, not just buffers.
  Tensor x2 = x * 1.0f, y2 = y + 0.0;

  // One call with three dtypes: three packed nodes; sum scaled by 0.5.
  auto s = dist::all_reduce(std::vector<Tensor>{x2, y2, z}, dist::ReduceOp::Sum);
  auto m = dist::all_reduce(std::vector<Tensor>{x2, y2}, dist::ReduceOp::Mean, 3.0);
  Tensor mx = dist::all_reduce(x2, dist::ReduceOp::Max);
  Tensor mn = dist::all_reduce(z, dist::ReduceOp::Min);
  Tensor g = dist::all_gather(x2);
  Tensor rs = dist::reduce_scatter(tensor<float>(std::vector<float>(world * 2, 1.0f + rank), {world, 2}),
                                   dist::ReduceOp::Sum, 0.5);
  Tensor b = dist::broadcast(y2, world - 1);
  mark_step();
  RANK_CHECK(last_step().ran_program);

  auto sx = s[0].to_vector<float>(), mxv = mx.to_vector<float>(), mx_mean = m[0].to_vector<float>();
  auto sy = s[1].to_vector<double>(), my = m[1].to_vector<double>(), bv = b.to_vector<double>();
  auto sz = s[2].to_vector<int64_t>(), mnv = mn.to_vector<int64_t>();
  RANK_CHECK(s[0].shape() == (Shape{2, 3}) && s[1].shape() == (Shape{5}));
  for (int i = 0; i < 6; ++i) {
    double sum = 0, best = -1e30;
    for (int r = 0; r < world; ++r) {
      sum += xin(r, i);
      best = std::max<double>(best, xin(r, i));
    }
    RANK_CHECK(near(sx[i], sum));
    RANK_CHECK(near(mx_mean[i], 3.0 * sum / world));
    RANK_CHECK(near(mxv[i], best));
  }
  for (int i = 0; i < 5; ++i) {
    double sum = 0;
    for (int r = 0; r < world; ++r) sum += yin(r, i);
    RANK_CHECK(near(sy[i], sum, 1e-12));
    RANK_CHECK(near(my[i], 3.0 * sum / world, 1e-12));
    RANK_CHECK(bv[i] == yin(world - 1, i));
  }
  for (int i = 0; i < 4; ++i) {
    int64_t sum = 0, least = 1 << 30;
    for (int r = 0; r < world; ++r) {
      sum += zin(r, i);
      least = std::min(least, zin(r, i));
    }
    RANK_CHECK(sz[i] == sum);
    RANK_CHECK(mnv[i] == least);
  }
  RANK_CHECK(g.shape() == (Shape{2 * world, 3}));
  auto gv = g.to_vector<float>();
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < 6; ++i) RANK_CHECK(gv[r * 6 + i] == xin(r, i));
  // reduce_scatter: every block sums (1 + r) over ranks, times 0.5; this rank keeps one row.
  RANK_CHECK(rs.shape() == (Shape{1, 2}));
  double want = 0;
  for (int r = 0; r < world; ++r) want += 1.0 + r;
  for (float v : rs.to_vector<float>()) RANK_CHECK(near(v, 0.5 * want));

  // The same step again hits the program cache and gives the same values.
  auto s2 = dist::all_reduce(std::vector<Tensor>{x2 * 2.0f});
  mark_step();
  auto v2 = s2[0].to_vector<float>();
  for (int i = 0; i < 6; ++i) RANK_CHECK(near(v2[i], 2 * sx[i]));
  dist::destroy();
  return 0;
}

class DistTest : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(DistTest, EveryCollectiveMatchesHostValues) {
  auto [world, backend] = GetParam();
  std::string dir = fresh_dir();
  auto codes = run_ranks(world, [&, w = world, be = backend](int r) {
    return all_collectives(r, w, dir, be);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The CPU backend's cases exist only when it is built (LAZYX_WITH_CPU).
const std::vector<std::string> kBackends = {"reference",
#ifdef LAZYX_TEST_HAVE_CPU
                                            "cpu"
#endif
};

INSTANTIATE_TEST_SUITE_P(Ranks, DistTest,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::ValuesIn(kBackends)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

// A gradient all-reduced in place: the result goes into the donated buffer of the tensor.
TEST(Dist, InPlaceResultWritesTheDonatedBuffer) {
  std::string dir = fresh_dir();
  auto codes = run_ranks(2, [&](int rank) {
    dist::init(rank, 2, dist::Store::file(dir));
    Tensor grad = tensor<float>(std::vector<float>(1024, 1.0f + rank), {1024});
    Tensor w = tensor<float>(std::vector<float>(1024, 0.0f), {1024});
    for (int step = 0; step < 3; ++step) {
      grad.copy_(dist::all_reduce(grad, dist::ReduceOp::Mean));
      w.sub_(grad, 0.5);
      mark_step();
      StepReport rep = last_step();
      RANK_CHECK(rep.num_donated >= 2);  // grad and w are both updated in place
    }
    auto gv = grad.to_vector<float>(), wv = w.to_vector<float>();
    RANK_CHECK(near(gv[7], 1.5) && near(wv[1023], -0.5 * 1.5 * 3));
    dist::destroy();
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// Ranks whose programs differ fail with both graph hashes instead of mixing their data.
TEST(Dist, DivergentProgramsRaiseNamingBothHashes) {
  std::string dir = fresh_dir();
  setenv("LAZYX_DIST_TIMEOUT", "10", 1);
  auto codes = run_ranks(2, [&](int rank) {
    dist::init(rank, 2, dist::Store::file(dir));
    Tensor x = tensor<float>(std::vector<float>(8, 1.0f), {8});
    Tensor r = dist::all_reduce(x);
    if (rank == 0) r = r * 2.0f;  // rank 0 traces one more op
    try {
      mark_step();
      std::fprintf(stderr, "rank %d: no error\n", rank);
      return 1;
    } catch (const Error& e) {
      std::string msg = e.what();
      RANK_CHECK(msg.find("disagree") != std::string::npos);
      RANK_CHECK(msg.find("rank 0 runs graph") != std::string::npos);
      RANK_CHECK(msg.find("rank 1 runs graph") != std::string::npos);
    }
    // Nothing ran, and the group still works for agreeing programs.
    Tensor y = dist::all_reduce(tensor<float>({1.0f + rank}, {1}));
    RANK_CHECK(y.item<float>() == 3.0f);
    dist::destroy();
    return 0;
  }, 30);
  unsetenv("LAZYX_DIST_TIMEOUT");
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// One rank reads a value that needs a collective (an extra sync) and the other never does:
// the waiting rank raises within the timeout.
TEST(Dist, ExtraSyncOnOneRankTimesOut) {
  std::string dir = fresh_dir();
  setenv("LAZYX_DIST_TIMEOUT", "3", 1);
  auto codes = run_ranks(2, [&](int rank) {
    dist::init(rank, 2, dist::Store::file(dir));
    Tensor r = dist::all_reduce(tensor<float>(std::vector<float>(4, 1.0f), {4}));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(6));  // never syncs, then leaves
      return 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
      r.to_vector<float>();
      return 1;
    } catch (const Error& e) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      RANK_CHECK(std::string(e.what()).find("did not join") != std::string::npos);
      RANK_CHECK(s < 6);
    }
    return 0;
  }, 30);
  unsetenv("LAZYX_DIST_TIMEOUT");
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// A killed rank makes the others raise, not hang.
TEST(Dist, KilledRankMakesOthersRaise) {
  std::string dir = fresh_dir();
  setenv("LAZYX_DIST_TIMEOUT", "10", 1);
  auto codes = run_ranks(3, [&](int rank) {
    dist::init(rank, 3, dist::Store::file(dir));
    if (rank == 2) raise(SIGKILL);
    Tensor r = dist::all_reduce(tensor<float>(std::vector<float>(4096, 1.0f), {4096}));
    try {
      mark_step();
      return 1;
    } catch (const Error& e) {
      RANK_CHECK(std::string(e.what()).find("[mark_step]") != std::string::npos);
    }
    // The group is broken now: later collectives raise at once.
    try {
      dist::all_reduce_host(nullptr, 0, kFloat32, dist::ReduceOp::Sum);
      Tensor again = dist::all_reduce(tensor<float>({1.0f}, {1}));
      again.item<float>();
      return 1;
    } catch (const Error&) {
    }
    return 0;
  }, 40);
  unsetenv("LAZYX_DIST_TIMEOUT");
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 100 + SIGKILL);
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(Dist, TcpRendezvous) {
  int port = free_port();
  auto codes = run_ranks(2, [&](int rank) {
    dist::init(rank, 2, dist::Store::tcp("127.0.0.1", port));
    Tensor r = dist::all_reduce(tensor<float>({1.0f + rank, 10.0f}, {2}));
    auto v = r.to_vector<float>();
    RANK_CHECK(v[0] == 3.0f && v[1] == 20.0f);
    dist::destroy();
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(Dist, BadInputIsAClearError) {
  auto codes = run_ranks(1, [&](int rank) {
    auto has = [](const std::function<void()>& f, const std::string& part) {
      try {
        f();
      } catch (const Error& e) {
        if (std::string(e.what()).find(part) != std::string::npos) return true;
        std::fprintf(stderr, "unexpected message: %s\n", e.what());
      }
      return false;
    };
    Tensor x = tensor<float>({1.0f, 2.0f}, {2});
    RANK_CHECK(has([&] { dist::all_reduce(x); }, "not initialized"));
    setenv("LAZYX_DIST_TIMEOUT", "soon", 1);
    RANK_CHECK(has([&] { dist::init(0, 1, dist::Store::file(fresh_dir())); }, "LAZYX_DIST_TIMEOUT"));
    unsetenv("LAZYX_DIST_TIMEOUT");
    RANK_CHECK(has([&] { dist::init(2, 2, dist::Store::file(fresh_dir())); }, "out of range"));
    dist::init(0, 1, dist::Store::file(fresh_dir()));
    RANK_CHECK(has([&] { dist::all_reduce(tensor<int64_t>({1, 2}, {2}), dist::ReduceOp::Mean); },
                   "floating"));
    RANK_CHECK(has([&] { dist::broadcast(x, 3); }, "root 3"));
    RANK_CHECK(has([&] { dist::all_reduce(x.gt(1.0f)); }, "bool"));
    // A world of one: every collective is the identity (times the scale).
    auto v = dist::all_reduce(x, dist::ReduceOp::Mean, 2.0).to_vector<float>();
    RANK_CHECK(v[0] == 2.0f && v[1] == 4.0f);
    dist::destroy();
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0}));
}

}  // namespace
}  // namespace lazyx
