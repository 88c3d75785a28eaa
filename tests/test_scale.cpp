// Graphs far deeper than any stack could recurse: long pending chains are dropped, walked,
// dumped and synced with constant stack depth, on every backend.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

constexpr int64_t kDeep = 1000000;  // nodes in a chain; recursion this deep overflows any stack

class Scale : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
  }
};

// x + n * 1 by a chain of n in-place adds of a materialized tensor.
Tensor chain(int64_t n, const Tensor& one) {
  Tensor x = zeros({4});
  for (int64_t i = 0; i < n; ++i) x.add_(one);
  return x;
}

TEST_P(Scale, DropsMillionOpChain) {
  Tensor one = full({4}, 1.0f);
  mark_step();
  {
    Tensor x = chain(kDeep, one);
    EXPECT_TRUE(x.defined());
  }  // the chain is released here, iteratively
  // The engine still works afterwards.
  Tensor y = one * 2;
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 2.0f));
}

// Graph dumps do not depend on the backend.
TEST(ScaleDump, DumpsMillionOpChain) {
  Tensor one = full({4}, 1.0f);
  mark_step();
  Tensor x = chain(kDeep, one);
  std::string text = graph_text({x});
  // One line per node: the zeros value, its pieces, `one` and the adds.
  EXPECT_GT(std::count(text.begin(), text.end(), '\n'), kDeep);
  EXPECT_NE(text.find("ROOT 0"), std::string::npos);
}

TEST_P(Scale, SyncsDeepChain) {
  Tensor one = full({4}, 1.0f);
  mark_step();
  // The cpu backend compiles the chain as loops of a bounded size (most of them one shared
  // kernel); a quarter of the depth keeps its plan and code generation to a couple of seconds.
  const int64_t n = GetParam() == "cpu" ? kDeep / 4 : kDeep;
  Tensor x = chain(n, one);
  Tensor keep = x * 1;  // a second root over the same chain
  mark_step();
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, static_cast<float>(n)));
  EXPECT_EQ(keep.to_vector<float>(), std::vector<float>(4, static_cast<float>(n)));
}

INSTANTIATE_TEST_SUITE_P(Backends, Scale, ::testing::ValuesIn(backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
