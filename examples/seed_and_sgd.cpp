// The main job until the PyTorch device exists: the seed's scenario, then a small training loop
// (linear regression by in-place SGD), printing each step's report and the memory statistics.
#include <cstdio>
#include <iostream>

#include "lazyx/lazyx.h"

using namespace lazyx;

static void banner(const char* title) { std::printf("\n=== %s ===\n", title); }

int main() {
  std::printf("lazyx on backend '%s'\n", backend_name().c_str());

  banner("seed scenario: x += 1; x *= 3; mark_step(); x *= 1; mark_step()");
  std::vector<float> values(25);
  for (int i = 0; i < 25; ++i) values[i] = 0.1f * static_cast<float>(i - 12);
  Tensor x = tensor(values, {5, 5});  // holds buffer B1, as after .to(device)
  x += 1;
  x *= 3;
  mark_step();
  std::cout << last_step().to_string();
  x *= 1;
  mark_step();
  std::cout << last_step().to_string();
  auto alias = metrics::metric_data("InputOutputAliasCount");
  std::printf("InputOutputAliasCount: %lld samples, accumulator %.0f\n",
              static_cast<long long>(alias ? alias->total_samples : 0),
              alias ? alias->accumulator : 0.0);

  banner("training loop: y = X w, 4 MiB of parameters, in-place SGD");
  const int64_t n = 256, d = 1024, k = 1024;  // w: 1024 x 1024 float32 = 4 MiB
  manual_seed(1);
  Tensor X = randn({n, d});
  Tensor w_true = randn({d, k}) * 0.05;
  Tensor Y = X.matmul(w_true);
  Tensor w = zeros({d, k});
  mark_step();
  reset_peak_memory_stats();
  const double lr = 0.1;
  for (int step = 0; step < 8; ++step) {
    Tensor loss;
    {
      Tensor err = X.matmul(w) - Y;
      loss = (err * err).mean();
      w.sub_(X.t().matmul(err), lr / n);  // gradient of the per-output mean squared error
    }  // err goes out of scope: only w and loss are outputs of the step
    mark_step();
    StepReport r = last_step();
    std::printf("step %d: loss %.6f, %s, %lld nodes, donated %lld/%lld params (%lld bytes), "
                "allocated %lld bytes, execute %.1f ms\n",
                step, loss.item<float>(), r.cache_hit ? "cached" : "compiled",
                static_cast<long long>(r.num_nodes), static_cast<long long>(r.num_donated),
                static_cast<long long>(r.num_parameters), static_cast<long long>(r.donated_bytes),
                static_cast<long long>(r.bytes_allocated), r.execute_ms);
  }
  banner("last step report");
  std::cout << last_step().to_string();
  banner("memory");
  std::cout << memory_stats().to_string() << "\n";
  banner("metrics");
  std::cout << metrics::metrics_report();
  return 0;
}
