// libtorch eager baseline for bench_core: 1000 x `x = x + 1` on a 4x4 tensor, in C++.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  at::set_num_threads(1);
  torch::Tensor x0 = torch::zeros({4, 4});
  std::vector<double> ns;
  for (int r = 0; r < 50; ++r) {
    torch::Tensor x = x0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) x = x + 1;
    auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 1000);
  }
  std::sort(ns.begin(), ns.end());
  std::printf("torch_eager_cpp_per_op %.1f ns\n", ns[ns.size() / 2]);
  return 0;
}
