// Reductions against hand-computed values: sum, mean, amax, amin, argmax, logsumexp over given
// dims (with and without keepdim, negative dims, all dims), softmax and log_softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lazyx/lazyx.h"
#include "ops_test_util.h"

namespace {

using namespace lazyx_ops_test;

// x[i][j][k] = 12 i + 4 j + k, shape [2,3,4].
Tensor Arange24() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  return lazyx::tensor<float>(v, {2, 3, 4});
}

// Unordered values, so that a max/argmax found by position would be wrong:
// [[1, 5, -2],
//  [7, 0,  3]]
Tensor Mixed() { return lazyx::tensor<float>({1, 5, -2, 7, 0, 3}, {2, 3}); }

// ---------------------------------------------------------------------------------------------
// sum

TEST(Reduce, SumAllDims) {
  BeforeAndAfterStep([] { return Arange24().sum(); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_DTYPE(r, kFloat32);
                       EXPECT_FLOAT_EQ(r.item<float>(), 276);
                     });
  BeforeAndAfterStep([] { return Arange24().sum({}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{1, 1, 1}));
                       ExpectFloats(r, {276});
                     });
  BeforeAndAfterStep(
      [] {
        return Arange24().sum({0, 1, 2});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{}));
        ExpectFloats(r, {276});
      });
}

TEST(Reduce, SumOneDim) {
  BeforeAndAfterStep([] { return Arange24().sum({0}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3, 4}));
                       ExpectFloats(r, {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34});
                     });
  BeforeAndAfterStep([] { return Arange24().sum({1}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 4}));
                       ExpectFloats(r, {12, 15, 18, 21, 48, 51, 54, 57});
                     });
  BeforeAndAfterStep([] { return Arange24().sum({2}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {6, 22, 38, 54, 70, 86});
                     });
}

TEST(Reduce, SumKeepdim) {
  BeforeAndAfterStep([] { return Arange24().sum({1}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 1, 4}));
                       ExpectFloats(r, {12, 15, 18, 21, 48, 51, 54, 57});
                     });
  BeforeAndAfterStep([] { return Arange24().sum({2}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3, 1}));
                       ExpectFloats(r, {6, 22, 38, 54, 70, 86});
                     });
  BeforeAndAfterStep(
      [] {
        return Arange24().sum({0, 2}, true);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{1, 3, 1}));
        ExpectFloats(r, {60, 92, 124});
      });
}

TEST(Reduce, SumSeveralAndNegativeDims) {
  BeforeAndAfterStep(
      [] {
        return Arange24().sum({0, 2});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        ExpectFloats(r, {60, 92, 124});
      });
  // -1 is dim 2, -3 is dim 0.
  BeforeAndAfterStep([] { return Arange24().sum({-1}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {6, 22, 38, 54, 70, 86});
                     });
  BeforeAndAfterStep(
      [] {
        return Arange24().sum({-1, -3});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        ExpectFloats(r, {60, 92, 124});
      });
  BeforeAndAfterStep([] { return Arange24().sum({-2}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 1, 4}));
                       ExpectFloats(r, {12, 15, 18, 21, 48, 51, 54, 57});
                     });
}

TEST(Reduce, SumOfIntegersAndBoolsIsInt64) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).sum();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.item<int64_t>(), 21);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).sum({1});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.shape(), (Shape{2}));
        ExpectInts(r, {6, 15});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int64_t>({-1, 2, -3, 4}, {2, 2}).sum({0});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {-4, 6});
      });
  // bool sum counts the trues.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false, true, true, false, true}, {2, 3}).sum();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.item<int64_t>(), 4);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false, true, true, false, true}, {2, 3}).sum({0});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {2, 0, 2});
      });
}

TEST(Reduce, Int32SumDoesNotOverflow) {
  // 3 * 2^30 overflows int32 but not the int64 accumulator.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1 << 30, 1 << 30, 1 << 30}).sum();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.item<int64_t>(), 3221225472LL);
      });
}

TEST(Reduce, SumKeepsFloatingDtype) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3.5}).to(kFloat16).sum();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        EXPECT_FLOAT_EQ(r.item<float>(), 6.5f);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<double>({0.1, 0.2, 0.3}).sum();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat64);
        EXPECT_NEAR(r.item<double>(), 0.6, 1e-15);
      });
}

TEST(Reduce, SumOfPendingAndNonContiguousInputs) {
  // A transposed view: [[1,2],[3,4]].t() = [[1,3],[2,4]].
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3, 4}, {2, 2}).t().sum({1});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {4, 6});
      });
  // A pending input (x * 2 + 1 not yet run).
  BeforeAndAfterStep(
      [] {
        return (Arange24() * 2 + 1).sum({0, 1});
      },
      [](const Tensor& r) {
        // Per k, the six (i, j) terms of 2 (12 i + 4 j + k) + 1 add up to
        // 2 (60 + 6 k) + 6, since the 12 i + 4 j add up to 60.
        ExpectFloats(r, {126, 138, 150, 162});
      });
}

// ---------------------------------------------------------------------------------------------
// mean

TEST(Reduce, Mean) {
  BeforeAndAfterStep([] { return Arange24().mean(); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_DTYPE(r, kFloat32);
                       EXPECT_FLOAT_EQ(r.item<float>(), 11.5f);
                     });
  BeforeAndAfterStep([] { return Arange24().mean({2}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
                     });
  BeforeAndAfterStep(
      [] {
        return Arange24().mean({0, 1});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{4}));
        ExpectFloats(r, {10, 11, 12, 13});
      });
  BeforeAndAfterStep([] { return Arange24().mean({-3}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{1, 3, 4}));
                       ExpectFloats(r, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
                     });
  BeforeAndAfterStep([] { return Mixed().mean({1}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 1}));
                       ExpectFloats(r, {4.0f / 3, 10.0f / 3});
                     });
}

TEST(Reduce, MeanKeepsHalfAndDouble) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2}).to(kFloat16).mean();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        EXPECT_FLOAT_EQ(r.item<float>(), 1.5f);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<double>({1, 2, 4}).mean();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat64);
        EXPECT_DOUBLE_EQ(r.item<double>(), 7.0 / 3);
      });
}

TEST(Reduce, MeanOfIntegerTensorRaises) {
  // torch: "mean(): could not infer output dtype. Input dtype must be either a floating point
  // or complex dtype."
  Tensor i = lazyx::tensor<int64_t>({1, 2, 3});
  EXPECT_THROW(i.mean(), lazyx::Error);
  EXPECT_THROW(i.mean({0}), lazyx::Error);
  EXPECT_THROW(lazyx::tensor<int32_t>({1, 2}).mean(), lazyx::Error);
  EXPECT_THROW(lazyx::tensor<bool>({true}).mean(), lazyx::Error);
}

// ---------------------------------------------------------------------------------------------
// amax / amin / argmax

TEST(Reduce, AmaxAndAmin) {
  BeforeAndAfterStep([] { return Mixed().amax({1}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2}));
                       ExpectFloats(r, {5, 7});
                     });
  BeforeAndAfterStep([] { return Mixed().amax({0}); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {7, 5, 3});
                     });
  BeforeAndAfterStep([] { return Mixed().amax(); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_FLOAT_EQ(r.item<float>(), 7);
                     });
  BeforeAndAfterStep([] { return Mixed().amin({1}); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {-2, 0});
                     });
  BeforeAndAfterStep([] { return Mixed().amin({-2}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{1, 3}));
                       ExpectFloats(r, {1, 0, -2});
                     });
  BeforeAndAfterStep([] { return Mixed().amin(); },
                     [](const Tensor& r) { EXPECT_FLOAT_EQ(r.item<float>(), -2); });
  BeforeAndAfterStep([] { return Mixed().amax({-1}, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 1}));
                       ExpectFloats(r, {5, 7});
                     });
}

TEST(Reduce, AmaxOverSeveralDimsAndAllNegative) {
  BeforeAndAfterStep(
      [] {
        return Arange24().amax({0, 2});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        ExpectFloats(r, {15, 19, 23});
      });
  BeforeAndAfterStep(
      [] {
        return Arange24().amin({1, 2}, true);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 1, 1}));
        ExpectFloats(r, {0, 12});
      });
  // All values negative: an accumulator started at 0 would be wrong.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({-5, -3, -4}).amax();
      },
      [](const Tensor& r) { EXPECT_FLOAT_EQ(r.item<float>(), -3); });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({5, 3, 4}).amin();
      },
      [](const Tensor& r) { EXPECT_FLOAT_EQ(r.item<float>(), 3); });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({-kInf, -kInf}).amax();
      },
      [](const Tensor& r) { EXPECT_EQ(r.item<float>(), -kInf); });
}

TEST(Reduce, AmaxKeepsIntegerDtype) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1, 5, -2, 7, 0, 3}, {2, 3}).amax({1});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        ExpectInts(r, {5, 7});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int64_t>({1, 5, -2, 7, 0, 3}, {2, 3}).amin();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.item<int64_t>(), -2);
      });
}

TEST(Reduce, Argmax) {
  BeforeAndAfterStep([] { return Mixed().argmax(1); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kInt64);
                       EXPECT_EQ(r.shape(), (Shape{2}));
                       ExpectInts(r, {1, 0});
                     });
  BeforeAndAfterStep([] { return Mixed().argmax(0); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3}));
                       ExpectInts(r, {1, 0, 1});
                     });
  BeforeAndAfterStep([] { return Mixed().argmax(-1, true); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 1}));
                       ExpectInts(r, {1, 0});
                     });
  // No dim: the index into the flattened tensor, as a 0-d int64.
  BeforeAndAfterStep([] { return Mixed().argmax(); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kInt64);
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_EQ(r.item<int64_t>(), 3);
                     });
  BeforeAndAfterStep([] { return Arange24().argmax(1); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 4}));
                       ExpectInts(r, {2, 2, 2, 2, 2, 2, 2, 2});
                     });
}

TEST(Reduce, ArgmaxTiesPickTheFirst) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({3, 1, 3, 3}).argmax();
      },
      [](const Tensor& r) { EXPECT_EQ(r.item<int64_t>(), 0); });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 4, 4, 2, 2, 0}, {2, 3}).argmax(1);
      },
      [](const Tensor& r) {
        ExpectInts(r, {1, 0});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({-1, -1}).argmax(0);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.item<int64_t>(), 0);
      });
}

// ---------------------------------------------------------------------------------------------
// logsumexp

TEST(Reduce, Logsumexp) {
  // log(e^0 + e^0) = log 2; log(e^1 + e^2) = 2.3132617.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 0, 1, 2}, {2, 2}).logsumexp({1});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0.69314718f, 2.3132617f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 0, 1, 2}, {2, 2}).logsumexp({-1}, true);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 1}));
        ExpectFloats(r, {0.69314718f, 2.3132617f});
      });
  // Over dim 0 of [[0,1],[2,3]]: log(1 + e^2) = 2.1269281, log(e + e^3) = 3.1269281.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 1, 2, 3}, {2, 2}).logsumexp({0});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2.1269281f, 3.1269281f});
      });
  // Over all dims: log(1 + e + e^2 + e^3) = 3.4401896.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 1, 2, 3}, {2, 2}).logsumexp({0, 1});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{}));
        EXPECT_NEAR(r.item<float>(), 3.4401896f, 1e-5);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 1, 2, 3}, {2, 2}).logsumexp({0, 1}, true);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{1, 1}));
        ExpectFloats(r, {3.4401896f});
      });
}

TEST(Reduce, LogsumexpIsStable) {
  // A naive log(sum(exp(x))) overflows to inf here.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1000, 1000}).logsumexp({0});
      },
      [](const Tensor& r) { EXPECT_NEAR(r.item<float>(), 1000.6931f, 1e-2); });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({-1000, -1000}).logsumexp({0});
      },
      [](const Tensor& r) { EXPECT_NEAR(r.item<float>(), -999.30685f, 1e-2); });
}

TEST(Reduce, LogsumexpOfIntegersIsFloat32) {
  // log(e + e^2 + e^3) = 3.4076059.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int64_t>({1, 2, 3}).logsumexp({0});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        EXPECT_NEAR(r.item<float>(), 3.4076059f, 1e-5);
      });
}

// ---------------------------------------------------------------------------------------------
// softmax / log_softmax

TEST(Reduce, Softmax) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3}).softmax(0);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0.090030573f, 0.24472847f, 0.66524096f});
      });
  // [[1,2],[3,5]] along dim 1 and dim 0.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3, 5}, {2, 2}).softmax(1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {0.26894142f, 0.73105858f, 0.11920292f, 0.88079708f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3, 5}, {2, 2}).softmax(-1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.26894142f, 0.73105858f, 0.11920292f, 0.88079708f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::softmax(lazyx::tensor<float>({1, 2, 3, 5}, {2, 2}), 0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.11920292f, 0.047425873f, 0.88079708f, 0.95257413f});
      });
}

TEST(Reduce, SoftmaxIsStableAndHandlesMinusInf) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1000, 1001}).softmax(0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.26894142f, 0.73105858f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, -kInf}).softmax(0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 0});
      });
}

TEST(Reduce, SoftmaxRowsSumToOne) {
  BeforeAndAfterStep([] { return Arange24().mul(0.3).softmax(2).sum({2}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {1, 1, 1, 1, 1, 1});
                     });
}

TEST(Reduce, LogSoftmax) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3}).log_softmax(0);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {-2.4076059f, -1.4076059f, -0.40760596f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::log_softmax(lazyx::tensor<float>({1, 2, 3, 5}, {2, 2}), 0);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {-2.1269281f, -3.0485873f, -0.12692801f, -0.048587352f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1, 2, 3, 5}, {2, 2}).log_softmax(-1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1.3132616f, -0.31326169f, -2.1269281f, -0.12692801f});
      });
  // Stable for large inputs: a naive log(softmax) gives -inf/nan.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({1000, 1001}).log_softmax(0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1.3132616f, -0.31326169f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 200}).log_softmax(0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-200, 0});
      });
}

TEST(Reduce, ReductionOfAReductionAcrossSteps) {
  Tensor x = Arange24();
  Tensor s = x.sum({2});  // [2,3]
  lazyx::mark_step();
  ExpectFloats(s, {6, 22, 38, 54, 70, 86});
  Tensor m = s.amax({0});  // [3]
  Tensor a = s.argmax(1);  // [2]
  EXPECT_EQ(m.shape(), (Shape{3}));
  lazyx::mark_step();
  ExpectFloats(m, {54, 70, 86});
  ExpectInts(a, {2, 2});
  ExpectFloats(s, {6, 22, 38, 54, 70, 86});
}

TEST(Reduce, ReductionSeesInPlaceUpdate) {
  Tensor x = lazyx::tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor before = x.sum();
  x.mul_(10);
  Tensor after = x.sum({0});
  // `before` was traced before the update and must not see it.
  EXPECT_FLOAT_EQ(before.item<float>(), 10);
  lazyx::mark_step();
  ExpectFloats(after, {40, 60});
  EXPECT_FLOAT_EQ(before.item<float>(), 10);
}

TEST(Reduce, InvalidDimsRaise) {
  Tensor x = Arange24();
  EXPECT_THROW(x.sum({3}), lazyx::Error);
  EXPECT_THROW(x.sum({-4}), lazyx::Error);
  EXPECT_THROW(x.amax({5}), lazyx::Error);
  EXPECT_THROW(x.argmax(3), lazyx::Error);
  EXPECT_THROW(x.softmax(3), lazyx::Error);
  EXPECT_THROW(x.sum({1, 1}), lazyx::Error);  // torch: dim 1 appears multiple times
}

TEST(Reduce, NanPropagates) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  // torch: amax/amin propagate nan and argmax treats nan as the maximum.
  BeforeAndAfterStep(
      [=] {
        return lazyx::tensor<float>({1, kNan, 3}).amax();
      },
      [](const Tensor& r) { EXPECT_TRUE(std::isnan(r.item<float>())); });
  BeforeAndAfterStep(
      [=] {
        return lazyx::tensor<float>({1, kNan, 3}).amin();
      },
      [](const Tensor& r) { EXPECT_TRUE(std::isnan(r.item<float>())); });
  BeforeAndAfterStep(
      [=] {
        return lazyx::tensor<float>({1, kNan, 3}).argmax();
      },
      [](const Tensor& r) { EXPECT_EQ(r.item<int64_t>(), 1); });
  BeforeAndAfterStep(
      [=] {
        return lazyx::tensor<float>({1, kNan, 3}).sum();
      },
      [](const Tensor& r) { EXPECT_TRUE(std::isnan(r.item<float>())); });
}

TEST(Reduce, LogsumexpOfAllMinusInf) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({-kInf, -kInf}).logsumexp({0});
      },
      [](const Tensor& r) { EXPECT_EQ(r.item<float>(), -kInf); });
}

TEST(Reduce, ReductionsOfExpandedAndOffsetViews) {
  // e = [[1],[2],[3]] expanded to [3,4] (stride 0 along dim 1).
  auto e = [] { return lazyx::tensor<float>({1, 2, 3}, {3, 1}).expand({3, 4}); };
  BeforeAndAfterStep([&] { return e().sum(); },
                     [](const Tensor& r) { EXPECT_FLOAT_EQ(r.item<float>(), 24); });
  BeforeAndAfterStep([&] { return e().sum({0}); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {6, 6, 6, 6});
                     });
  BeforeAndAfterStep([&] { return e().mean({1}); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {1, 2, 3});
                     });
  // Rows 1..2 of x[i][j] = 4 i + j (offset 4), and column 2 (stride 4, offset 2).
  auto x = [] { return lazyx::tensor<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}); };
  BeforeAndAfterStep([&] { return x().slice(0, 1).sum({1}); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {22, 38});
                     });
  BeforeAndAfterStep([&] { return x().select(1, 2).amax(); },
                     [](const Tensor& r) { EXPECT_FLOAT_EQ(r.item<float>(), 10); });
  BeforeAndAfterStep([&] { return x().select(1, 2).argmax(0); },
                     [](const Tensor& r) { EXPECT_EQ(r.item<int64_t>(), 2); });
  BeforeAndAfterStep([&] { return x().slice(1, 1, 4, 2).softmax(1); },
                     [](const Tensor& r) {
                       // Each row is [a, a + 2].
                       ExpectFloats(r, {0.11920292f, 0.88079708f, 0.11920292f, 0.88079708f,
                                        0.11920292f, 0.88079708f});
                     });
}

TEST(Reduce, SoftmaxOverLeadingDimOfRank3) {
  // x[i][j][k] = 4 i + 2 j + k: along dim 0 each pair differs by 4.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}).softmax(0);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2, 2}));
        ExpectFloats(r, {0.017986210f, 0.017986210f, 0.017986210f, 0.017986210f, 0.98201379f,
                         0.98201379f, 0.98201379f, 0.98201379f});
      });
}

}  // namespace
