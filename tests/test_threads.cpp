// Threads. The rule (docs/FUZZING.md, "Threads"): every lazyx call takes one engine-wide lock,
// so calls from several threads are serialized. Tracing on different tensors while another
// thread calls mark_step() works; each in-place op is atomic; a call that cannot run (a dead
// backend) raises lazyx::Error and changes nothing. Values never depend on the interleaving.
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace lazyx {
namespace {

class Threads : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    set_backend_alive(true);
    mark_step();
  }
  void TearDown() override {
    set_backend_alive(true);
    mark_step();
  }

  std::mutex mu_;
  std::vector<std::string> problems_;
  void problem(const std::string& p) {
    std::lock_guard<std::mutex> l(mu_);
    if (problems_.size() < 20) problems_.push_back(p);
  }
  void expect_no_problems() {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& p : problems_) ADD_FAILURE() << p;
  }
};

bool near(double got, double want) { return std::fabs(got - want) <= 1e-4 * (1 + std::fabs(want)); }

// Host replay of one tracer's momentum-SGD loop, rounding to float32 after every op.
struct Replay {
  float w, m;
  void step() {
    m = static_cast<float>(static_cast<double>(static_cast<float>(m * 0.9f)) + 0.5);
    w = static_cast<float>(static_cast<double>(w) - static_cast<double>(0.01f) * m);
  }
};

// Several threads trace training loops on their own tensors (with views, temporaries, reads,
// partial syncs and user donations) while another thread calls mark_step() nonstop.
TEST_P(Threads, TracersOnTheirOwnTensorsWhileAnotherThreadSteps) {
  constexpr int kTracers = 4, kIters = 200;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> steps{0};
  std::thread stepper([&] {
    while (!stop.load()) {
      try {
        mark_step();
        steps++;
        StepReport r = last_step();
        if (r.kind != "mark_step" && r.kind != "sync" && r.kind != "read") problem("odd report kind " + r.kind);
        (void)memory_stats();
        (void)program_cache_size();
        (void)metrics::counter_value("MarkStep");
      } catch (const std::exception& e) {
        problem(std::string("mark_step raised: ") + e.what());
      }
    }
  });
  std::vector<std::thread> tracers;
  for (int k = 0; k < kTracers; ++k) {
    tracers.emplace_back([&, k] {
      try {
        Tensor w = full({8}, static_cast<double>(k + 1));
        Tensor m = zeros({8});
        Tensor g = full({8}, 0.5);
        Replay h{static_cast<float>(k + 1), 0.0f};
        for (int i = 0; i < kIters; ++i) {
          m.mul_(0.9).add_(g);
          w.sub_(m, 0.01);
          h.step();
          Tensor tmp = w * 2 + m;           // a temporary graph, dropped unread
          Tensor row = w.slice(0, 2, 6);    // a view into w
          Tensor sq = row.mul(row).sum();   // reads through the view
          if (i % 5 == 0) {
            double got = w.select(0, 3).item<double>();
            if (!near(got, h.w)) problem("tracer " + std::to_string(k) + " read " + std::to_string(got) +
                                         ", expected " + std::to_string(h.w));
          }
          if (i % 7 == 0) sync({w, m});
          if (i % 9 == 0) {
            double got = sq.item<double>();
            if (!near(got, 4.0 * h.w * h.w)) problem("tracer " + std::to_string(k) + " sum of squares " +
                                                     std::to_string(got));
          }
          if (i % 11 == 0) {
            // A user-requested donation of a buffer only this thread holds.
            Tensor c = tensor<float>(std::vector<float>(8, 1.0f), {8});
            Tensor d = c + w;
            if (!set_buffer_donation(c, true)) problem("set_buffer_donation on a fresh tensor returned false");
            std::vector<float> dv = d.to_vector<float>();
            for (float x : dv) {
              if (!near(x, 1.0 + h.w)) problem("tracer " + std::to_string(k) + " donation-fed value " + std::to_string(x));
            }
            // Donated by the read, or by a mark_step of the other thread that got there first;
            // if that step computed d before the flag was set, c keeps its value and the flag.
            if (!is_donated(c) && (!get_buffer_donation(c) || c.to_vector<float>() != std::vector<float>(8, 1.0f))) {
              problem("a flagged tensor that was not donated lost its value or its flag");
            }
          }
        }
        std::vector<float> wv = w.to_vector<float>(), mv = m.to_vector<float>();
        for (int j = 0; j < 8; ++j) {
          if (!near(wv[j], h.w) || !near(mv[j], h.m)) {
            problem("tracer " + std::to_string(k) + " final w[" + std::to_string(j) + "] = " +
                    std::to_string(wv[j]) + " (expected " + std::to_string(h.w) + "), m = " +
                    std::to_string(mv[j]) + " (expected " + std::to_string(h.m) + ")");
            break;
          }
        }
      } catch (const std::exception& e) {
        problem("tracer " + std::to_string(k) + " raised: " + e.what());
      }
    });
  }
  for (auto& t : tracers) t.join();
  stop = true;
  stepper.join();
  expect_no_problems();
  EXPECT_GT(steps.load(), 0);
  // The engine is still consistent: one more step runs and donates a fresh in-place update.
  Tensor x = tensor<float>({1, 2}, {2});
  x.add_(1);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 3}));
}

// In-place ops on one shared tensor from several threads are atomic: no update is lost, even
// with steps (and donations) in between.
TEST_P(Threads, InPlaceUpdatesOfASharedTensorAreAtomic) {
  // Each step's graph differs in length, so a compiling backend compiles every step: fewer there.
  const int kThreads = 4, kIters = GetParam() == "reference" ? 500 : 100;
  Tensor x = zeros({16});
  mark_step();
  std::atomic<bool> stop{false};
  std::thread stepper([&] {
    while (!stop.load()) {
      try {
        mark_step();
      } catch (const std::exception& e) {
        problem(std::string("mark_step raised: ") + e.what());
      }
    }
  });
  std::vector<std::thread> ts;
  for (int k = 0; k < kThreads; ++k) {
    Tensor mine = x;  // each thread its own handle to the same tensor
    ts.emplace_back([&, mine, k]() mutable {
      try {
        for (int i = 0; i < kIters; ++i) {
          if (i % 2) {
            mine.add_(1);
          } else {
            mine.select(0, k).add_(0);  // through a view
            mine.slice(0, 0, 16).add_(1);
          }
        }
      } catch (const std::exception& e) {
        problem(std::string("add_ raised: ") + e.what());
      }
    });
  }
  for (auto& t : ts) t.join();
  stop = true;
  stepper.join();
  expect_no_problems();
  std::vector<float> v = x.to_vector<float>();
  for (float f : v) EXPECT_EQ(f, static_cast<float>(kThreads * kIters));
}

// Handles created on one thread and dropped on another while steps run.
TEST_P(Threads, HandlesDroppedOnAnotherThread) {
  std::mutex qmu;
  std::vector<Tensor> queue;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    try {
      Tensor base = tensor<float>(testing::iota(12), {3, 4});
      for (int i = 0; i < 400; ++i) {
        Tensor t = base.select(0, i % 3) * static_cast<double>(i);
        Tensor u = base.clone();
        u.add_(1);
        std::lock_guard<std::mutex> l(qmu);
        queue.push_back(std::move(t));
        queue.push_back(std::move(u));
      }
      std::vector<float> v = base.to_vector<float>();
      if (v != testing::iota(12)) problem("the shared base changed");
    } catch (const std::exception& e) {
      problem(std::string("producer raised: ") + e.what());
    }
    done = true;
  });
  std::thread consumer([&] {
    int n = 0;
    while (!done.load() || n < 800) {
      std::vector<Tensor> batch;
      {
        std::lock_guard<std::mutex> l(qmu);
        batch.swap(queue);
      }
      n += static_cast<int>(batch.size());
      try {
        if (n % 3 == 0) mark_step();
        for (size_t i = 0; i < batch.size() && i < 2; ++i) (void)batch[i].sum().item<double>();
      } catch (const std::exception& e) {
        problem(std::string("consumer raised: ") + e.what());
      }
      batch.clear();  // drops the handles here
      if (done.load() && n >= 800) break;
      std::this_thread::yield();
    }
  });
  std::thread stepper([&] {
    while (!done.load()) {
      try {
        mark_step();
      } catch (const std::exception& e) {
        problem(std::string("mark_step raised: ") + e.what());
      }
    }
  });
  producer.join();
  consumer.join();
  stepper.join();
  expect_no_problems();
  mark_step();
}

// A backend that dies and revives while threads trace: syncs either work or raise a clear
// lazyx::Error, and once it is alive again every value is right.
TEST_P(Threads, DeadBackendRaisesClearErrorsAndCorruptsNothing) {
  constexpr int kTracers = 3, kIters = 150;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> dead_errors{0};
  std::vector<Tensor> ws;
  for (int k = 0; k < kTracers; ++k) ws.push_back(tensor<float>(std::vector<float>(4, 0.0f), {4}));
  std::thread chaos([&] {
    bool alive = true;
    while (!stop.load()) {
      alive = !alive;
      set_backend_alive(alive);
      try {
        mark_step();
      } catch (const Error& e) {
        if (!std::strstr(e.what(), "dead")) problem(std::string("mark_step raised an unclear error: ") + e.what());
        dead_errors++;
      } catch (const std::exception& e) {
        problem(std::string("mark_step raised a non-lazyx exception: ") + e.what());
      }
      std::this_thread::yield();
    }
    set_backend_alive(true);
  });
  std::vector<std::thread> tracers;
  for (int k = 0; k < kTracers; ++k) {
    tracers.emplace_back([&, k] {
      Tensor w = ws[k];
      for (int i = 0; i < kIters; ++i) {
        try {
          w.add_(1);
          if (i % 4 == 0) {
            double got = w.select(0, 0).item<double>();
            if (got != i + 1) problem("read " + std::to_string(got) + ", expected " + std::to_string(i + 1));
          }
        } catch (const Error& e) {
          if (!std::strstr(e.what(), "dead")) problem(std::string("unclear error: ") + e.what());
          dead_errors++;
        } catch (const std::exception& e) {
          problem(std::string("non-lazyx exception: ") + e.what());
        }
      }
    });
  }
  for (auto& t : tracers) t.join();
  stop = true;
  chaos.join();
  expect_no_problems();
  set_backend_alive(true);
  mark_step();
  for (int k = 0; k < kTracers; ++k) {
    EXPECT_EQ(ws[k].to_vector<float>(), std::vector<float>(4, static_cast<float>(kIters))) << "tracer " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Threads, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
