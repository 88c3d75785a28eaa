// lazyx-soak: 10,000 steps of a training-like loop (a two-layer MLP with momentum SGD, a fresh
// random batch every step, an uploaded batch donated by the user every step). After warm-up,
// bytes_in_use and the program cache must stay flat: no leak and no unbounded cache. Every step
// must donate every in-place updated parameter (rule 1) and the user-donated batch (rule 3).
//
//   lazyx-soak [--steps N] [--warmup W] [--backend NAME] [--quiet]
//
// Exit status 0 when everything held, 1 otherwise. Not run by CTest by default
// (configure with -DLAZYX_SOAK_TEST=ON to register it). See docs/FUZZING.md.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

int main(int argc, char** argv) {
  int64_t steps = 10000, warmup = 50;
  std::string backend = backend_name();
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoll(argv[++i]);
    else if (a == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (a == "--quiet") quiet = true;
    else {
      std::fprintf(stderr, "usage: lazyx-soak [--steps N] [--warmup W] [--backend NAME] [--quiet]\n");
      return 2;
    }
  }
  if (warmup >= steps) warmup = steps / 2;
  int failures = 0;
  auto fail = [&](int64_t step, const std::string& what) {
    if (failures++ < 20) std::printf("FAIL at step %lld: %s\n", static_cast<long long>(step), what.c_str());
  };
  try {
    set_backend(backend);
    manual_seed(42);
    const int64_t B = 16, D = 64, H = 32, O = 10;
    Tensor w1 = randn({D, H}) * 0.1, b1 = zeros({H}), w2 = randn({H, O}) * 0.1;
    Tensor m1 = zeros({D, H}), mb1 = zeros({H}), m2 = zeros({H, O});
    Tensor loss, noise, gb1;
    mark_step();
    const double lr = 0.01, beta = 0.9;
    std::vector<float> host(H);

    int64_t base_bytes = -1, base_cache = -1, base_peak = -1;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < steps; ++step) {
      // A batch from the RNG: seed and offset are run-time scalars, so no recompile.
      Tensor x = randn({B, D}) * 0.5;
      // Gradient noise uploaded from the host and donated by the user: its buffer is reused by
      // an output of the step of the same size.
      for (int64_t k = 0; k < H; ++k) host[k] = static_cast<float>(((step * 7 + k * 13) % 17) - 8) / 16.0f;
      noise = tensor<float>(std::vector<float>(host.begin(), host.begin() + H), {H});
      if (!set_buffer_donation(noise, true)) fail(step, "set_buffer_donation on an uploaded tensor returned false");

      Tensor pre = addmm(b1, x, w1);
      Tensor h = pre.relu();
      Tensor out = h.matmul(w2);
      loss = (out * out).mean();
      Tensor dout = out * (2.0 / static_cast<double>(B * O));
      Tensor gw2 = h.t().matmul(dout);
      Tensor dh = dout.matmul(w2.t()) * pre.gt(0).to(kFloat32);
      Tensor gw1 = x.t().matmul(dh);
      gb1 = dh.sum({0}) + noise * 1e-3;  // kept for monitoring across the step

      m1.mul_(beta).add_(gw1);
      mb1.mul_(beta).add_(gb1);
      m2.mul_(beta).add_(gw2);
      w1.sub_(m1, lr);
      b1.sub_(mb1, lr);
      w2.sub_(m2, lr);
      // Drop the step's temporaries before the barrier, as a training loop's scope does.
      x = pre = h = out = dout = gw2 = dh = gw1 = Tensor();
      mark_step();
      if (!is_donated(noise)) fail(step, "the user-donated tensor was not donated");

      StepReport r = last_step();
      int64_t in_place = 0, user = 0;
      for (const auto& p : r.params) {
        if (p.donated && p.reason == AliasReason::InPlaceUpdate) in_place++;
        if (p.donated && p.reason == AliasReason::UserRequested) user++;
      }
      if (in_place != 6) fail(step, "expected 6 in-place donations, got " + std::to_string(in_place) + "\n" + r.to_string());
      if (user != 1) fail(step, "expected the user-donated tensor to be donated, got " + std::to_string(user));
      if (step >= 1 && !r.cache_hit) fail(step, "the step recompiled (cache miss)");

      MemoryStats ms = memory_stats();
      int64_t cache = program_cache_size();
      if (step == warmup) {
        base_bytes = ms.bytes_in_use;
        base_cache = cache;
        reset_peak_memory_stats();
        base_peak = memory_stats().peak_bytes;
      } else if (step > warmup) {
        if (ms.bytes_in_use != base_bytes) {
          fail(step, "bytes_in_use " + std::to_string(ms.bytes_in_use) + " != " + std::to_string(base_bytes) + " after warm-up");
        }
        if (cache != base_cache) {
          fail(step, "program cache size " + std::to_string(cache) + " != " + std::to_string(base_cache));
        }
      }
      if (step % 1000 == 0 || step == steps - 1) {
        double l = loss.item<double>();
        if (!std::isfinite(l)) fail(step, "loss is not finite");
        if (!quiet) {
          double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::printf("step %6lld  loss %.6f  bytes_in_use %lld  peak %lld  cached %lld  programs %lld  %.1f s\n",
                      static_cast<long long>(step), l, static_cast<long long>(ms.bytes_in_use),
                      static_cast<long long>(ms.peak_bytes), static_cast<long long>(ms.bytes_cached),
                      static_cast<long long>(cache), secs);
          std::fflush(stdout);
        }
      }
    }
    MemoryStats end = memory_stats();
    // Peak after warm-up: the state, one step's temporaries and the loss; it must not creep.
    std::printf("lazyx-soak: %lld steps on %s: bytes_in_use %lld (after warm-up %lld), peak since warm-up %lld "
                "(at warm-up %lld), program cache %lld (after warm-up %lld)\n",
                static_cast<long long>(steps), backend.c_str(), static_cast<long long>(end.bytes_in_use),
                static_cast<long long>(base_bytes), static_cast<long long>(end.peak_bytes),
                static_cast<long long>(base_peak), static_cast<long long>(program_cache_size()),
                static_cast<long long>(base_cache));
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("lazyx-soak: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
