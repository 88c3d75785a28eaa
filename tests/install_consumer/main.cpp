#include <lazyx/lazyx.h>

#include <cstdio>

int main() {
  lazyx::Tensor x = lazyx::tensor<float>({1, 2, 3}, {3});
  x *= 2;
  lazyx::mark_step();
  float s = x.sum().item<float>();
  std::printf("sum %g, donated %lld\n", s, static_cast<long long>(lazyx::last_step().num_donated));
  return s == 12.0f ? 0 : 1;
}
