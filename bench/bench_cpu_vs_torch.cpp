// CPU backend against libtorch eager, in one process on the same thread count:
//  (a) ((x*2+1).relu()*3 - x).exp() on 16 Mi float32: lazyx cached step, one hand-written fused
//      loop (this file is compiled -O3 -march=native -ffast-math), torch eager;
//  (b) a 3-layer MLP (784-512-512-10, batch 256): forward, cross-entropy, manual backward and an
//      in-place SGD step, lazyx (one cached step per iteration) against torch eager.
// Threads: LAZYX_NUM_THREADS (default all cores); torch gets the same number. Run it with 1 and
// then 2 threads for the scaling figures. Prints "name value unit" lines and ratios.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using Clock = std::chrono::steady_clock;
namespace lx = lazyx;
using lazyx::bench::median;
using lazyx::bench::num_threads;

static double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
__attribute__((noinline)) static void hand_loop(const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    float t = x[i] * 2.0f + 1.0f;
    t = t > 0.0f ? t : 0.0f;
    y[i] = std::exp(t * 3.0f - x[i]);
  }
}

static std::vector<float> host_values(int64_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) * (1.0f / 16777216.0f) - 0.5f) * scale;
  }
  return v;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = num_threads();
  at::set_num_threads(threads);
  lx::set_backend("cpu");
  std::printf("threads %d\n", threads);

  // (a) The elementwise expression.
  {
    const int64_t n = int64_t{16} << 20;
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>((i % 1000) * 0.001 - 0.5);
    lx::Tensor x = lx::tensor<float>(host, {n});
    lx::mark_step();
    std::vector<double> lazy_ms, hand_ms, torch_ms;
    lx::Tensor y;
    for (int r = 0; r < reps + 2; ++r) {
      y = lx::Tensor();
      auto t0 = Clock::now();
      y = ((x * 2 + 1).relu() * 3 - x).exp();
      lx::mark_step();
      if (r >= 2) lazy_ms.push_back(ms_since(t0));
      if (r == 0) lx::wait_for_background_compiles();  // time the full tier
    }
    std::vector<float> out(n);
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = Clock::now();
      std::vector<std::thread> ts;
      for (int t = 1; t < threads; ++t) {
        ts.emplace_back([&, t] { hand_loop(host.data(), out.data(), n * t / threads, n * (t + 1) / threads); });
      }
      hand_loop(host.data(), out.data(), 0, n / threads);
      for (auto& t : ts) t.join();
      if (r >= 2) hand_ms.push_back(ms_since(t0));
    }
    torch::NoGradGuard ng;
    torch::Tensor tx = torch::from_blob(host.data(), {n}, torch::kFloat32).clone();
    torch::Tensor ty;
    for (int r = 0; r < std::max(3, reps / 4) + 1; ++r) {
      ty = torch::Tensor();
      auto t0 = Clock::now();
      ty = ((tx * 2 + 1).relu() * 3 - tx).exp();
      if (r >= 1) torch_ms.push_back(ms_since(t0));
    }
    std::vector<float> got = y.to_vector<float>();
    double maxrel = 0;
    const float* tp = ty.data_ptr<float>();
    for (int64_t i = 0; i < n; i += 997) {
      maxrel = std::max(maxrel, static_cast<double>(std::fabs(got[i] - out[i]) / std::fabs(out[i])));
      maxrel = std::max(maxrel, static_cast<double>(std::fabs(tp[i] - out[i]) / std::fabs(out[i])));
    }
    double l = median(lazy_ms), h = median(hand_ms), t = median(torch_ms);
    std::printf("expr_lazyx_cached_step %.3f ms\n", l);
    std::printf("expr_hand_fused_loop %.3f ms\n", h);
    std::printf("expr_torch_eager %.3f ms\n", t);
    std::printf("expr_ratio_lazyx_over_hand %.2f x\n", l / h);
    std::printf("expr_speedup_lazyx_over_torch %.1f x\n", t / l);
    std::printf("expr_max_rel_diff %.2e\n", maxrel);
  }

  // (b) The MLP training step.
  {
    const int64_t B = 256, D0 = 784, D1 = 512, D2 = 512, D3 = 10;
    const float lr = 0.01f;
    std::vector<float> hx = host_values(B * D0, 1, 2.0f);
    std::vector<float> hw1 = host_values(D0 * D1, 2, 0.1f), hw2 = host_values(D1 * D2, 3, 0.1f),
                       hw3 = host_values(D2 * D3, 4, 0.1f);
    std::vector<float> hy(B * D3, 0.0f);
    for (int64_t i = 0; i < B; ++i) hy[i * D3 + i % D3] = 1.0f;
    const int steps = std::max(10, reps);

    // lazyx
    lx::Tensor x = lx::tensor<float>(hx, {B, D0}), onehot = lx::tensor<float>(hy, {B, D3});
    lx::Tensor w1 = lx::tensor<float>(hw1, {D0, D1}), w2 = lx::tensor<float>(hw2, {D1, D2}),
               w3 = lx::tensor<float>(hw3, {D2, D3});
    lx::Tensor b1 = lx::zeros({D1}), b2 = lx::zeros({D2}), b3 = lx::zeros({D3});
    lx::mark_step();
    std::vector<double> lazy_ms;
    lx::Tensor loss;
    // The step's temporaries die before mark_step, so they are not outputs of the program.
    auto lazy_step = [&] {
      lx::Tensor h1 = (x.matmul(w1) + b1).relu();
      lx::Tensor h2 = (h1.matmul(w2) + b2).relu();
      lx::Tensor logits = h2.matmul(w3) + b3;
      loss = -(logits.log_softmax(1) * onehot).sum() / static_cast<double>(B);
      lx::Tensor dl = (logits.softmax(1) - onehot) / static_cast<double>(B);
      lx::Tensor dw3 = h2.t().matmul(dl), db3 = dl.sum({0});
      lx::Tensor dz2 = dl.matmul(w3.t()) * h2.gt(0).to(lx::kFloat32);
      lx::Tensor dw2 = h1.t().matmul(dz2), db2 = dz2.sum({0});
      lx::Tensor dz1 = dz2.matmul(w2.t()) * h1.gt(0).to(lx::kFloat32);
      lx::Tensor dw1 = x.t().matmul(dz1), db1 = dz1.sum({0});
      w1.sub_(dw1, lr);
      b1.sub_(db1, lr);
      w2.sub_(dw2, lr);
      b2.sub_(db2, lr);
      w3.sub_(dw3, lr);
      b3.sub_(db3, lr);
    };
    for (int s = 0; s < steps + 3; ++s) {
      auto t0 = Clock::now();
      lazy_step();
      lx::mark_step();
      if (s >= 3) lazy_ms.push_back(ms_since(t0));
      if (s == 1) lx::wait_for_background_compiles();
    }
    double lazy_loss = loss.item<double>();

    // torch eager
    torch::NoGradGuard ng;
    auto T = [](std::vector<float>& v, std::vector<int64_t> s) {
      return torch::from_blob(v.data(), s, torch::kFloat32).clone();
    };
    torch::Tensor tx = T(hx, {B, D0}), toh = T(hy, {B, D3});
    torch::Tensor tw1 = T(hw1, {D0, D1}), tw2 = T(hw2, {D1, D2}), tw3 = T(hw3, {D2, D3});
    torch::Tensor tb1 = torch::zeros({D1}), tb2 = torch::zeros({D2}), tb3 = torch::zeros({D3});
    std::vector<double> torch_ms;
    torch::Tensor tloss;
    for (int s = 0; s < steps + 3; ++s) {
      auto t0 = Clock::now();
      torch::Tensor h1 = (tx.matmul(tw1) + tb1).relu();
      torch::Tensor h2 = (h1.matmul(tw2) + tb2).relu();
      torch::Tensor logits = h2.matmul(tw3) + tb3;
      tloss = -(logits.log_softmax(1) * toh).sum() / static_cast<double>(B);
      torch::Tensor dl = (logits.softmax(1) - toh) / static_cast<double>(B);
      torch::Tensor dw3 = h2.t().matmul(dl), db3 = dl.sum(0);
      torch::Tensor dz2 = dl.matmul(tw3.t()) * h2.gt(0).to(torch::kFloat32);
      torch::Tensor dw2 = h1.t().matmul(dz2), db2 = dz2.sum(0);
      torch::Tensor dz1 = dz2.matmul(tw2.t()) * h1.gt(0).to(torch::kFloat32);
      torch::Tensor dw1 = tx.t().matmul(dz1), db1 = dz1.sum(0);
      tw1.sub_(dw1, lr); tb1.sub_(db1, lr);
      tw2.sub_(dw2, lr); tb2.sub_(db2, lr);
      tw3.sub_(dw3, lr); tb3.sub_(db3, lr);
      if (s >= 3) torch_ms.push_back(ms_since(t0));
    }
    double l = median(lazy_ms), t = median(torch_ms);
    std::printf("mlp_lazyx_step %.3f ms\n", l);
    std::printf("mlp_torch_eager_step %.3f ms\n", t);
    std::printf("mlp_speedup_lazyx_over_torch %.2f x\n", t / l);
    std::printf("mlp_loss_after_%d_steps lazyx %.6f torch %.6f\n", steps + 3, lazy_loss, tloss.item<double>());
    // The SGD updates as GEMM epilogues (beta = 1, alpha = -lr) against separate update loops
    // (LAZYX_CPU_NO_GEMM_EPILOGUE), alternating rounds of 10 steps in this process.
    std::vector<double> on_ms, off_ms;
    for (int round = 0; round < 6; ++round) {
      const bool off = round % 2 == 1;
      if (off) {
        setenv("LAZYX_CPU_NO_GEMM_EPILOGUE", "1", 1);
      } else {
        unsetenv("LAZYX_CPU_NO_GEMM_EPILOGUE");
      }
      lx::clear_program_cache();
      for (int s = 0; s < 12; ++s) {
        auto t0 = Clock::now();
        lazy_step();
        lx::mark_step();
        if (s >= 2) (off ? off_ms : on_ms).push_back(ms_since(t0));
        if (s == 0) lx::wait_for_background_compiles();
      }
    }
    unsetenv("LAZYX_CPU_NO_GEMM_EPILOGUE");
    double on = median(on_ms), offm = median(off_ms);
    std::printf("mlp_lazyx_step_gemm_epilogue %.3f ms separate_update_loops %.3f ms ratio %.2f\n",
                on, offm, offm / on);
  }
  // (c) Reductions, normalizations and a transposed read on 4096 x 4096 float32.
  {
    const int64_t R = 4096, C = 4096;
    std::vector<float> hx = host_values(R * C, 5, 4.0f), hy = host_values(R * C, 6, 4.0f);
    lx::Tensor x = lx::tensor<float>(hx, {R, C}), y = lx::tensor<float>(hy, {R, C});
    lx::mark_step();
    torch::NoGradGuard ng;
    torch::Tensor tx = torch::from_blob(hx.data(), {R, C}, torch::kFloat32).clone();
    torch::Tensor ty = torch::from_blob(hy.data(), {R, C}, torch::kFloat32).clone();
    struct Case {
      const char* name;
      std::function<lx::Tensor()> l;
      std::function<torch::Tensor()> t;
    };
    std::vector<Case> cases = {
        {"sum_dim0", [&] { return (x * 2).sum({0}); }, [&] { return (tx * 2).sum(0); }},
        {"sum_dim1", [&] { return (x * 2).sum({1}); }, [&] { return (tx * 2).sum(1); }},
        {"sum_all", [&] { return (x * 2).sum(); }, [&] { return (tx * 2).sum(); }},
        {"amax_dim0", [&] { return x.amax({0}); }, [&] { return tx.amax(0); }},
        {"amax_dim1", [&] { return x.amax({1}); }, [&] { return tx.amax(1); }},
        {"softmax_dim1", [&] { return (x * 2).softmax(1); }, [&] { return (tx * 2).softmax(1); }},
        {"log_softmax_dim1", [&] { return x.log_softmax(1); }, [&] { return tx.log_softmax(1); }},
        {"logsumexp_dim1", [&] { return x.logsumexp({1}); }, [&] { return tx.logsumexp(1); }},
        {"argmax_dim1", [&] { return x.argmax(1); }, [&] { return tx.argmax(1); }},
        {"add_transposed", [&] { return x + y.t(); }, [&] { return tx + ty.t(); }},
    };
    for (const Case& c : cases) {
      std::vector<double> lm, tm;
      lx::Tensor r;
      for (int k = 0; k < 8; ++k) {
        r = lx::Tensor();
        auto t0 = Clock::now();
        r = c.l();
        lx::mark_step();
        if (k >= 2) lm.push_back(ms_since(t0));
        if (k == 0) lx::wait_for_background_compiles();
      }
      torch::Tensor tr;
      for (int k = 0; k < 5; ++k) {
        tr = torch::Tensor();
        auto t0 = Clock::now();
        tr = c.t();
        if (k >= 1) tm.push_back(ms_since(t0));
      }
      double l = median(lm), t = median(tm);
      std::printf("%s lazyx %.3f ms torch %.3f ms speedup %.1f x\n", c.name, l, t, t / l);
    }
  }
  return 0;
}
