#include <gtest/gtest.h>

#include "lazyx/lazyx.h"

TEST(Smoke, AddMul) {
  auto x = lazyx::tensor<float>({1, 2, 3, 4}, {2, 2});
  x += 1;
  x *= 3;
  lazyx::mark_step();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{6, 9, 12, 15}));
}
