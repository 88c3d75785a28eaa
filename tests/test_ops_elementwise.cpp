// Elementwise ops against hand-computed values: arithmetic, unary math, comparisons, logic,
// conversions, in-place variants, broadcasting and PyTorch's type promotion.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "ops_test_util.h"

namespace {

using namespace lazyx_ops_test;

// ---------------------------------------------------------------------------------------------
// add / sub / mul / div

TEST(Elementwise, AddSameShape) {
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3, 4}, {2, 2}) + F32({10, 20, 30, 40}, {2, 2});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {11, 22, 33, 44});
      });
}

TEST(Elementwise, AddAndSubWithAlpha) {
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}).add(F32({4, 5, 6}), 2);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {9, 12, 15});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}).sub(F32({4, 5, 6}), 0.5);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1, -0.5, 0});
      });
  // Scalar other with alpha: x + 3 * 2 and x - 1 * 3.
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}).add(3, 2);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {7, 8, 9});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}).sub(1, 3);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-2, -1, 0});
      });
}

TEST(Elementwise, AddWithAlphaBroadcasts) {
  // [3,1] with [1,4] -> [3,4]: r[i][j] = a[i] - b[j].
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3, 1}).add(F32({10, 20, 30, 40}, {1, 4}), -1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 4}));
        ExpectFloats(r, {-9, -19, -29, -39, -8, -18, -28, -38, -7, -17, -27, -37});
      });
}

TEST(Elementwise, IntegerAddWithAlphaStaysInt64) {
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).add(I64({1, 1, 2}), 3);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {4, 5, 9});
      });
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).sub(I64({1, 1, 2}), 2);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {-1, 0, -1});
      });
}

TEST(Elementwise, AlphaValuesShareOneProgram) {
  // alpha is a run-time operand: a second value must not compile a new program.
  Tensor x = F32({1, 2});
  Tensor y = F32({3, 4});
  Tensor r = x.add(y, 2);
  lazyx::mark_step();
  ExpectFloats(r, {7, 10});
  int64_t before = lazyx::metrics::counter_value("UncachedCompile").value_or(0);
  r = x.add(y, -5);
  lazyx::mark_step();
  ExpectFloats(r, {-14, -18});
  EXPECT_EQ(lazyx::metrics::counter_value("UncachedCompile").value_or(0), before);
}

TEST(Elementwise, MulAndDiv) {
  BeforeAndAfterStep(
      [] {
        return F32({1.5, -2, 3}) * F32({2, 4, -0.5});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {3, -8, -1.5});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, -3, 7}).div(F32({4, 2, -2}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.25, -1.5, -3.5});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, -3, 7}).mul(-2);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-2, 6, -14});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, -3, 7}).div(2);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.5, -1.5, 3.5});
      });
}

TEST(Elementwise, DivByZeroGivesInfAndNan) {
  BeforeAndAfterStep(
      [] {
        return F32({1, -1, 0}) / F32({0, 0, 0});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {kInf, -kInf, kNan});
      });
}

TEST(Elementwise, IntegerDivIsTrueDivisionToFloat32) {
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3, 7}) / I64({2, 2, 2, 2});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0.5, 1, 1.5, 3.5});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1, 2, 3}) / 4;
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0.25, 0.5, 0.75});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({-7, 9}).div(2);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {-3.5, 4.5});
      });
}

TEST(Elementwise, ScalarOperandsOnBothSides) {
  BeforeAndAfterStep(
      [] {
        return 2 - F32({1, 5, -1});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, -3, 3});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 5, -1}) - 2;
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1, 3, -3});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 6, -2}) / 4;
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.25, 1.5, -0.5});
      });
  BeforeAndAfterStep(
      [] {
        return 8 / F32({1, 2, -4});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {8, 4, -2});
      });
  BeforeAndAfterStep(
      [] {
        return 1.5 + F32({1, 2});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2.5, 3.5});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 2}) + 1.5;
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2.5, 3.5});
      });
  BeforeAndAfterStep(
      [] {
        return 3 * F32({1, -2});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {3, -6});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, -2}) * 3;
      },
      [](const Tensor& r) {
        ExpectFloats(r, {3, -6});
      });
  BeforeAndAfterStep(
      [] {
        return -F32({1, -2});
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1, 2});
      });
}

TEST(Elementwise, ScalarOperandsWithIntegerTensors) {
  BeforeAndAfterStep(
      [] {
        return 2 - I64({1, 5});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {1, -3});
      });
  // A float scalar with an int tensor gives the default float32.
  BeforeAndAfterStep(
      [] {
        return 1.5 * I64({1, 2});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1.5, 3});
      });
  BeforeAndAfterStep(
      [] {
        return 6 / lazyx::tensor<int32_t>({4, -3});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1.5, -2});
      });
  // An int scalar does not widen int32.
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({4, -3}) + 100;
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        ExpectInts(r, {104, 97});
      });
}

TEST(Elementwise, ScalarValuesShareOneProgram) {
  // Host scalars are run-time operands: `x * 3` then `x * 5` compile once.
  Tensor x = F32({1, 2});
  Tensor r = x * 3;
  lazyx::mark_step();
  ExpectFloats(r, {3, 6});
  int64_t before = lazyx::metrics::counter_value("UncachedCompile").value_or(0);
  r = x * 5;
  lazyx::mark_step();
  ExpectFloats(r, {5, 10});
  EXPECT_EQ(lazyx::metrics::counter_value("UncachedCompile").value_or(0), before);
}

// ---------------------------------------------------------------------------------------------
// Unary math

TEST(Elementwise, NegAndAbs) {
  BeforeAndAfterStep(
      [] {
        return F32({-2.5, 0, 3}).neg();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2.5, 0, -3});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-2.5, 0, 3}).abs();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2.5, 0, 3});
      });
  BeforeAndAfterStep(
      [] {
        return I64({-3, 4}).abs();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {3, 4});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({-3, 4}).neg();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        ExpectInts(r, {3, -4});
      });
}

TEST(Elementwise, ExpAndLog) {
  BeforeAndAfterStep(
      [] {
        return F32({0, 1, -1, 2}).exp();
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{4}));
        ExpectFloats(r, {1, 2.7182817f, 0.36787945f, 7.3890561f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 2.7182817f, 10, 0.5, 0}).log();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 1, 2.3025851f, -0.69314718f, -kInf});
      });
  BeforeAndAfterStep([] { return F32({-1}).log(); },
                     [](const Tensor& r) { ExpectFloats(r, {kNan}); });
}

TEST(Elementwise, SqrtAndRsqrt) {
  BeforeAndAfterStep(
      [] {
        return F32({0, 1, 4, 2}).sqrt();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 1, 2, 1.4142135f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 4, 0.25, 2}).rsqrt();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 0.5, 2, 0.70710678f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-4, 0}).sqrt();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {kNan, 0});
      });
  BeforeAndAfterStep([] { return F32({0}).rsqrt(); },
                     [](const Tensor& r) { ExpectFloats(r, {kInf}); });
}

TEST(Elementwise, FloatingUnaryOpsOnIntegersGiveFloat32) {
  // torch.sqrt / exp / sigmoid of an integer (or bool) tensor compute in the default float32.
  BeforeAndAfterStep(
      [] {
        return I64({4, 9}).sqrt();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {2, 3});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({0, 1}).exp();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1, 2.7182817f});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false}).sigmoid();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0.73105858f, 0.5f});
      });
}

TEST(Elementwise, Pow) {
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, -3}).pow(2);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 4, 9});
      });
  BeforeAndAfterStep(
      [] {
        return F32({4, 9, 2}).pow(0.5);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {2, 3, 1.4142135f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({2, 4}).pow(-1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.5, 0.25});
      });
  BeforeAndAfterStep(
      [] {
        return F32({2, 3, 5}).pow(F32({3, 2, 0}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {8, 9, 1});
      });
  // Broadcast exponent: [2,1] ** [3].
  BeforeAndAfterStep(
      [] {
        return F32({2, 3}, {2, 1}).pow(F32({0, 1, 2}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {1, 2, 4, 1, 3, 9});
      });
}

TEST(Elementwise, PowDtypes) {
  BeforeAndAfterStep(
      [] {
        return I64({2, 3}).pow(2);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {4, 9});
      });
  BeforeAndAfterStep(
      [] {
        return I64({4, 9}).pow(0.5);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {2, 3});
      });
  BeforeAndAfterStep(
      [] {
        return I64({2, 3}).pow(F32({0.5, 2}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1.4142135f, 9});
      });
}

TEST(Elementwise, TanhAndSigmoid) {
  BeforeAndAfterStep(
      [] {
        return F32({0, 0.5, -1, 2}).tanh();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 0.46211716f, -0.76159416f, 0.96402758f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({0, 1, -2, 3}).sigmoid();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.5, 0.73105858f, 0.11920292f, 0.95257413f});
      });
  // Saturation must not produce nan.
  BeforeAndAfterStep(
      [] {
        return F32({-100, 100}).sigmoid();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 1});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-100, 100}).tanh();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1, 1});
      });
}

TEST(Elementwise, Relu) {
  BeforeAndAfterStep(
      [] {
        return F32({-1, 0, 2.5, -0.1f}).relu();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 0, 2.5, 0});
      });
  BeforeAndAfterStep(
      [] {
        return I64({-3, 5}).relu();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {0, 5});
      });
}

TEST(Elementwise, GeluErf) {
  // x * Phi(x) with the exact normal CDF.
  BeforeAndAfterStep(
      [] {
        return F32({-1, 0, 0.5, 1, 2}).gelu();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-0.15865529f, 0, 0.34573120f, 0.84134471f, 1.9544997f});
      });
}

TEST(Elementwise, GeluTanhApproximation) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): differs from the erf form in the 4th digit.
  BeforeAndAfterStep(
      [] {
        return F32({-1, 0, 0.5, 1, 2}).gelu(true);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-0.15880801f, 0, 0.34571400f, 0.84119201f, 1.9545977f});
      });
}

TEST(Elementwise, SinAndCos) {
  BeforeAndAfterStep(
      [] {
        return F32({0, 0.52359878f, 1.5707964f, -1}).sin();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 0.5, 1, -0.84147098f});
      });
  BeforeAndAfterStep(
      [] {
        return F32({0, 1.0471976f, 3.1415927f, 1}).cos();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 0.5, -1, 0.54030231f});
      });
}

// ---------------------------------------------------------------------------------------------
// maximum / minimum / clamp / where

TEST(Elementwise, MaximumAndMinimum) {
  BeforeAndAfterStep(
      [] {
        return lazyx::maximum(F32({1, 5, -2}), F32({3, 4, -2}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {3, 5, -2});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::minimum(F32({1, 5, -2}), F32({3, 4, -2}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 4, -2});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 5}, {2, 1}).maximum(F32({0, 2, 7}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {1, 2, 7, 5, 5, 7});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 5}, {2, 1}).minimum(F32({0, 2, 7}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 1, 1, 0, 2, 5});
      });
  // int64 with float32 promotes to float32.
  BeforeAndAfterStep(
      [] {
        return lazyx::maximum(I64({1, 4}), F32({2.5, 3.5}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {2.5, 4});
      });
}

TEST(Elementwise, MaximumPropagatesNan) {
  BeforeAndAfterStep(
      [] {
        return lazyx::maximum(F32({kNan, 1}), F32({0, kNan}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {kNan, kNan});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::minimum(F32({kNan, 1}), F32({0, kNan}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {kNan, kNan});
      });
}

TEST(Elementwise, Clamp) {
  BeforeAndAfterStep(
      [] {
        return F32({-2, -0.5, 0.5, 2}).clamp(-1, 1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1, -0.5, 0.5, 1});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-2, -0.5, 0.5, 2}).clamp(0, std::nullopt);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0, 0, 0.5, 2});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-2, -0.5, 0.5, 2}).clamp(std::nullopt, 0.25);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-2, -0.5, 0.25, 0.25});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::clamp(F32({-2, 3}), -1.5, 1.5);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-1.5, 1.5});
      });
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).clamp(2, std::nullopt);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {2, 2, 3});
      });
  // A float bound promotes an int tensor, as torch.clamp(int_tensor, min=1.5).
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).clamp(1.5, std::nullopt);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1.5, 2, 3});
      });
}

TEST(Elementwise, Where) {
  auto cond = [] { return lazyx::tensor<bool>({true, false, true}); };
  BeforeAndAfterStep(
      [&] {
        return lazyx::where(cond(), F32({1, 2, 3}), F32({-1, -2, -3}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1, -2, 3});
      });
  BeforeAndAfterStep(
      [&] {
        return lazyx::where(cond(), 0.5, F32({-1, -2, -3}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {0.5, -2, 0.5});
      });
  BeforeAndAfterStep(
      [&] {
        return lazyx::where(cond(), F32({1, 2, 3}), 9);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 9, 3});
      });
}

TEST(Elementwise, WhereBroadcastsAndPromotes) {
  // cond [3,1], a [1,2], b 0-d -> [3,2].
  BeforeAndAfterStep(
      [] {
        return lazyx::where(lazyx::tensor<bool>({true, false, true}, {3, 1}), F32({1, 2}, {1, 2}),
                            lazyx::tensor<float>({7}, {}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 2}));
        ExpectFloats(r, {1, 2, 7, 7, 1, 2});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::where(lazyx::tensor<bool>({true, false}), I64({1, 2}), F32({5.5, 6.5}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1, 6.5});
      });
  // An int scalar keeps int32; a float scalar gives the default float32.
  BeforeAndAfterStep(
      [] {
        return lazyx::where(lazyx::tensor<bool>({true, false}), 1, lazyx::tensor<int32_t>({5, 6}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        ExpectInts(r, {1, 6});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::where(lazyx::tensor<bool>({true, false}), 1.5,
                            lazyx::tensor<int32_t>({5, 6}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1.5, 6});
      });
}

// ---------------------------------------------------------------------------------------------
// Comparisons and logic

TEST(Elementwise, ComparisonsWithTensors) {
  auto a = [] { return F32({1, 2, 3}); };
  auto b = [] { return F32({2, 2, 2}); };
  auto check_bool = [](const std::vector<bool>& want) {
    return [want](const Tensor& r) {
      EXPECT_DTYPE(r, kBool);
      EXPECT_EQ(r.shape(), (Shape{3}));
      ExpectBools(r, want);
    };
  };
  BeforeAndAfterStep([&] { return a().eq(b()); }, check_bool({false, true, false}));
  BeforeAndAfterStep([&] { return a().ne(b()); }, check_bool({true, false, true}));
  BeforeAndAfterStep([&] { return a().lt(b()); }, check_bool({true, false, false}));
  BeforeAndAfterStep([&] { return a().le(b()); }, check_bool({true, true, false}));
  BeforeAndAfterStep([&] { return a().gt(b()); }, check_bool({false, false, true}));
  BeforeAndAfterStep([&] { return a().ge(b()); }, check_bool({false, true, true}));
}

TEST(Elementwise, ComparisonsWithScalars) {
  auto a = [] { return I64({1, 2, 3}); };
  BeforeAndAfterStep([&] { return a().eq(2); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {false, true, false});
                     });
  BeforeAndAfterStep([&] { return a().ne(2); },
                     [](const Tensor& r) {
                       ExpectBools(r, {true, false, true});
                     });
  // int tensor against a float scalar compares in float: 2 < 2.5.
  BeforeAndAfterStep([&] { return a().lt(2.5); },
                     [](const Tensor& r) {
                       ExpectBools(r, {true, true, false});
                     });
  BeforeAndAfterStep([&] { return a().le(2); },
                     [](const Tensor& r) {
                       ExpectBools(r, {true, true, false});
                     });
  BeforeAndAfterStep([&] { return a().gt(1.5); },
                     [](const Tensor& r) {
                       ExpectBools(r, {false, true, true});
                     });
  BeforeAndAfterStep([&] { return a().ge(3); },
                     [](const Tensor& r) {
                       ExpectBools(r, {false, false, true});
                     });
}

TEST(Elementwise, ComparisonsBroadcastAndPromote) {
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).lt(F32({1.5, 1.5, 3.5}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBool);
        ExpectBools(r, {true, false, true});
      });
  // [2,1] vs [3] -> [2,3].
  BeforeAndAfterStep(
      [] {
        return F32({1, 2}, {2, 1}).eq(F32({1, 2, 1}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectBools(r, {true, false, true, false, true, false});
      });
  // nan compares unequal to everything, itself included.
  BeforeAndAfterStep(
      [] {
        return F32({kNan, 1}).eq(F32({kNan, 1}));
      },
      [](const Tensor& r) {
        ExpectBools(r, {false, true});
      });
  BeforeAndAfterStep(
      [] {
        return F32({kNan, 1}).ne(F32({kNan, 1}));
      },
      [](const Tensor& r) {
        ExpectBools(r, {true, false});
      });
}

TEST(Elementwise, LogicalOps) {
  auto a = [] { return lazyx::tensor<bool>({true, true, false, false}); };
  auto b = [] { return lazyx::tensor<bool>({true, false, true, false}); };
  BeforeAndAfterStep([&] { return a().logical_and(b()); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {true, false, false, false});
                     });
  BeforeAndAfterStep([&] { return a().logical_or(b()); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {true, true, true, false});
                     });
  BeforeAndAfterStep([&] { return a().logical_not(); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {false, false, true, true});
                     });
}

TEST(Elementwise, LogicalOpsOnNumbers) {
  // Nonzero is true; results are bool whatever the input dtypes.
  BeforeAndAfterStep(
      [] {
        return F32({0, 1, 2}).logical_and(I64({1, 0, 3}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBool);
        ExpectBools(r, {false, false, true});
      });
  BeforeAndAfterStep(
      [] {
        return F32({0, 0, -0.5}).logical_or(I64({0, 7, 0}));
      },
      [](const Tensor& r) {
        ExpectBools(r, {false, true, true});
      });
  BeforeAndAfterStep(
      [] {
        return F32({0, 1.5, -2}).logical_not();
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBool);
        ExpectBools(r, {true, false, false});
      });
  // Broadcast [2,1] with [2].
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false}, {2, 1})
            .logical_and(lazyx::tensor<bool>({true, false}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectBools(r, {true, false, false, false});
      });
}

// ---------------------------------------------------------------------------------------------
// Conversions and 16-bit floats

TEST(Elementwise, ToTruncatesFloatToInt) {
  BeforeAndAfterStep(
      [] {
        return F32({1.7f, -1.7f, 2.5f, -0.5f}).to(kInt64);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {1, -1, 2, 0});
      });
  BeforeAndAfterStep(
      [] {
        return F32({3.9f, -3.9f}).to(kInt32);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{3, -3}));
      });
}

TEST(Elementwise, ToAndFromBool) {
  BeforeAndAfterStep(
      [] {
        return F32({0, 0.5, -1}).to(kBool);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBool);
        ExpectBools(r, {false, true, true});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false}).to(kFloat32);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1, 0});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false}).to(kInt32);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt32);
        ExpectInts(r, {1, 0});
      });
}

TEST(Elementwise, ToWidensAndKeepsShape) {
  BeforeAndAfterStep(
      [] {
        return I64({-3, 7, 1, 2}).to(kFloat32).view({2, 2});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {-3, 7, 1, 2});
      });
  BeforeAndAfterStep([] { return F32({0.1f}).to(kFloat64); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat64);
                       // float32(0.1) widened exactly, not double 0.1.
                       EXPECT_EQ(r.item<double>(), static_cast<double>(0.1f));
                     });
  BeforeAndAfterStep([] { return lazyx::tensor<double>({0.1}).to(kFloat32); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat32);
                       EXPECT_EQ(r.item<float>(), 0.1f);
                     });
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({-5, 300}).to(kInt64);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {-5, 300});
      });
}

TEST(Elementwise, Float16Rounding) {
  // Round to nearest even at 11 significant bits; 70000 overflows to inf, 1e-8 flushes to 0.
  BeforeAndAfterStep(
      [] {
        return F32({1.0f / 3, 0.1f, 65504, 70000, 1e-8f, -2.5f}).to(kFloat16);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        std::vector<float> got = r.to_vector<float>();
        EXPECT_EQ(got,
                  (std::vector<float>{0.333251953125f, 0.0999755859375f, 65504, kInf, 0, -2.5f}));
      });
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10 (ties to the even 1); 1 + 3 * 2^-11 is halfway
  // between 1 + 2^-10 and 1 + 2^-9 (ties to the even 1 + 2^-9).
  BeforeAndAfterStep(
      [] {
        return F32({1.00048828125f, 1.00146484375f}).to(kFloat16);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1.0f, 1.001953125f}));
      });
}

TEST(Elementwise, BFloat16Rounding) {
  // 8 significant bits: 70000 -> 70144, 65504 -> 65536.
  BeforeAndAfterStep(
      [] {
        return F32({1.0f / 3, 0.1f, 65504, 70000, -2.5f}).to(kBFloat16);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBFloat16);
        EXPECT_EQ(r.to_vector<float>(),
                  (std::vector<float>{0.333984375f, 0.10009765625f, 65536, 70144, -2.5f}));
      });
  // 1 + 2^-8 ties to 1; 1 + 3 * 2^-8 ties to 1 + 2^-6.
  BeforeAndAfterStep(
      [] {
        return F32({1.00390625f, 1.01171875f}).to(kBFloat16);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1.0f, 1.015625f}));
      });
}

TEST(Elementwise, HalfConversionFunctions) {
  EXPECT_EQ(lazyx::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(lazyx::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(lazyx::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(lazyx::float_to_half(1e6f), 0x7C00);
  EXPECT_EQ(lazyx::half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(lazyx::half_to_float(0x0001), 5.9604644775390625e-8f);  // smallest subnormal
  EXPECT_EQ(lazyx::float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(lazyx::float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(lazyx::bf16_to_float(0x3EAB), 0.333984375f);
  EXPECT_TRUE(std::isnan(lazyx::half_to_float(lazyx::float_to_half(kNan))));
  EXPECT_TRUE(std::isnan(lazyx::bf16_to_float(lazyx::float_to_bf16(kNan))));
}

TEST(Elementwise, Float16ArithmeticRoundsEachResult) {
  // f16(0.1) + f16(0.2) = 0.2999267578125 exactly, a tie at f16 spacing 2^-12 that rounds to
  // the even 0.2998046875.
  BeforeAndAfterStep([] { return F32({0.1f}).to(kFloat16) + F32({0.2f}).to(kFloat16); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat16);
                       EXPECT_EQ(r.item<float>(), 0.2998046875f);
                     });
  // bf16: 1 + 2^-8 rounds back to 1.
  BeforeAndAfterStep([] { return F32({1}).to(kBFloat16) + F32({0.00390625f}).to(kBFloat16); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBFloat16);
                       EXPECT_EQ(r.item<float>(), 1.0f);
                     });
  // f16 * scalar stays f16: 1000 * 100 overflows to inf.
  BeforeAndAfterStep([] { return F32({1000}).to(kFloat16) * 100; },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat16);
                       EXPECT_EQ(r.item<float>(), kInf);
                     });
}

// ---------------------------------------------------------------------------------------------
// Broadcasting

TEST(Elementwise, BroadcastColumnWithRow) {
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3, 1}) * F32({1, 10, 100, 1000}, {1, 4});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 4}));
        ExpectFloats(r, {1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000});
      });
}

TEST(Elementwise, BroadcastVectorAgainstRank3) {
  // [4] with [2,3,4]: the vector repeats along the leading dims. Both operand orders.
  auto big = [] {
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
    return F32(v, {2, 3, 4});
  };
  std::vector<float> want = {0,  11, 102, 1003, 4,  15, 106, 1007, 8,  19, 110, 1011,
                             12, 23, 114, 1015, 16, 27, 118, 1019, 20, 31, 122, 1023};
  BeforeAndAfterStep(
      [&] {
        return F32({0, 10, 100, 1000}) + big();
      },
      [&](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
        ExpectFloats(r, want);
      });
  BeforeAndAfterStep(
      [&] {
        return big() + F32({0, 10, 100, 1000});
      },
      [&](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
        ExpectFloats(r, want);
      });
}

TEST(Elementwise, BroadcastZeroDimAndSizeOne) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<float>({5}, {}) - F32({1, 2, 3}, {1, 3});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{1, 3}));
        ExpectFloats(r, {4, 3, 2});
      });
  BeforeAndAfterStep([] { return lazyx::tensor<float>({5}, {}) * lazyx::tensor<float>({3}, {}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_EQ(r.dim(), 0);
                       EXPECT_EQ(r.numel(), 1);
                       EXPECT_FLOAT_EQ(r.item<float>(), 15);
                     });
}

TEST(Elementwise, IncompatibleShapesRaise) {
  EXPECT_THROW(F32({1, 2, 3, 4, 5, 6}, {2, 3}) + F32({1, 2, 3, 4}), lazyx::Error);
  EXPECT_THROW(F32({1, 2}, {2, 1}).mul(F32({1, 2, 3, 4, 5, 6}, {3, 2})), lazyx::Error);
  EXPECT_THROW(lazyx::where(lazyx::tensor<bool>({true, false, true}), F32({1, 2}), F32({3, 4})),
               lazyx::Error);
}

// ---------------------------------------------------------------------------------------------
// Type promotion

const Dtype kAllDtypes[7] = {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// torch.promote_types(kAllDtypes[i], kAllDtypes[j]).
const Dtype kPromoted[7][7] = {
    // Columns: bool, int32, int64, float16, bfloat16, float32, float64.
    {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64},            // bool
    {kInt32, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64},           // int32
    {kInt64, kInt64, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64},           // int64
    {kFloat16, kFloat16, kFloat16, kFloat16, kFloat32, kFloat32, kFloat64},      // float16
    {kBFloat16, kBFloat16, kBFloat16, kFloat32, kBFloat16, kFloat32, kFloat64},  // bfloat16
    {kFloat32, kFloat32, kFloat32, kFloat32, kFloat32, kFloat32, kFloat64},      // float32
    {kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64},      // float64
};

TEST(Elementwise, PromoteTypesTable) {
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 7; ++j) {
      EXPECT_EQ(lazyx::promote_types(kAllDtypes[i], kAllDtypes[j]), kPromoted[i][j])
          << lazyx::dtype_name(kAllDtypes[i]) << " + " << lazyx::dtype_name(kAllDtypes[j]);
    }
  }
}

TEST(Elementwise, AddPromotesEveryDtypePair) {
  for (bool step : {false, true}) {
    // All 49 results are built first so that one mark_step runs them together.
    std::vector<Tensor> results;
    for (int i = 0; i < 7; ++i) {
      for (int j = 0; j < 7; ++j) {
        Tensor a = F32({1, 0}).to(kAllDtypes[i]);
        Tensor b = F32({1, 1}).to(kAllDtypes[j]);
        results.push_back(a + b);
      }
    }
    if (step) lazyx::mark_step();
    for (int i = 0; i < 7; ++i) {
      for (int j = 0; j < 7; ++j) {
        const Tensor& r = results[i * 7 + j];
        SCOPED_TRACE(std::string(lazyx::dtype_name(kAllDtypes[i])) + " + " +
                     lazyx::dtype_name(kAllDtypes[j]) + (step ? " after mark_step" : ""));
        EXPECT_DTYPE(r, kPromoted[i][j]);
        EXPECT_EQ(r.shape(), (Shape{2}));
        // bool + bool is logical or: [true, true]; otherwise [1 + 1, 0 + 1].
        if (kPromoted[i][j] == kBool) {
          ExpectBools(r, {true, true});
        } else {
          ExpectFloats(r, {2, 1});
        }
      }
    }
  }
}

TEST(Elementwise, ZeroDimTensorsAndScalarsPromoteWithinCategory) {
  Tensor i32 = lazyx::tensor<int32_t>({1, 2});
  Tensor f16 = F32({1, 2}).to(kFloat16);
  Tensor b = lazyx::tensor<bool>({true, false});
  Tensor i64_0d = lazyx::tensor<int64_t>({5}, {});
  Tensor f64_0d = lazyx::tensor<double>({0.5}, {});
  Tensor f16_0d = F32({0.5}, {}).to(kFloat16);

  // A 0-d tensor of the same category does not widen a tensor with dims.
  Tensor r1 = i32 + i64_0d;
  EXPECT_DTYPE(r1, kInt32);
  ExpectInts(r1, {6, 7});
  Tensor r2 = f16 + f64_0d;
  EXPECT_DTYPE(r2, kFloat16);
  ExpectFloats(r2, {1.5, 2.5});
  // A 0-d tensor of a higher category decides, with its own dtype.
  Tensor r3 = i32 + f64_0d;
  EXPECT_DTYPE(r3, kFloat64);
  ExpectFloats(r3, {1.5, 2.5});
  Tensor r4 = i32 + f16_0d;
  EXPECT_DTYPE(r4, kFloat16);
  ExpectFloats(r4, {1.5, 2.5});
  Tensor r5 = b + i64_0d;
  EXPECT_DTYPE(r5, kInt64);
  ExpectInts(r5, {6, 5});
  // Two 0-d tensors promote normally.
  Tensor r6 = lazyx::tensor<int32_t>({1}, {}) + i64_0d;
  EXPECT_DTYPE(r6, kInt64);
  EXPECT_EQ(r6.item<int64_t>(), 6);
  Tensor r7 = i64_0d + f64_0d;
  EXPECT_DTYPE(r7, kFloat64);
  EXPECT_EQ(r7.item<double>(), 5.5);
}

TEST(Elementwise, HostScalarsPromoteWithinCategory) {
  Tensor i32 = lazyx::tensor<int32_t>({1, 2});
  Tensor i64 = I64({1, 2});
  Tensor f16 = F32({1, 2}).to(kFloat16);
  Tensor bf16 = F32({1, 2}).to(kBFloat16);
  Tensor b = lazyx::tensor<bool>({true, false});
  Tensor f32_0d = F32({2}, {});
  Tensor i64_0d = lazyx::tensor<int64_t>({2}, {});

  EXPECT_DTYPE(i32 + 1, kInt32);
  EXPECT_DTYPE(i64 + 2.5, kFloat32);  // float scalar with int tensor: default float32
  EXPECT_DTYPE(i32 * 2.5, kFloat32);
  EXPECT_DTYPE(f16 + 2.5, kFloat16);  // same category: the tensor's dtype
  EXPECT_DTYPE(bf16 * 3, kBFloat16);
  EXPECT_DTYPE(b + 1, kInt64);  // int scalar with bool tensor: default int64
  EXPECT_DTYPE(b * 2.5, kFloat32);
  EXPECT_DTYPE(b + true, kBool);
  EXPECT_DTYPE(f32_0d + 2.5, kFloat32);
  EXPECT_DTYPE(i64_0d + 2.5, kFloat32);
  EXPECT_DTYPE(lazyx::tensor<double>({1, 2}) + 1.5f, kFloat64);

  ExpectInts(i32 + 1, {2, 3});
  ExpectFloats(i64 + 2.5, {3.5, 4.5});
  ExpectFloats(f16 + 2.5, {3.5, 4.5});
  ExpectInts(b + 1, {2, 1});
  ExpectFloats(b * 2.5, {2.5, 0});
  ExpectBools(b + true, {true, true});
  EXPECT_FLOAT_EQ((i64_0d + 2.5).item<float>(), 4.5f);
}

TEST(Elementwise, MixedInt32Int64AndHalfBFloat) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<int32_t>({1, 2}) + I64({10, 20});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {11, 22});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1.5, 2}).to(kFloat16) * F32({2, 0.25}).to(kBFloat16);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {3, 0.5});
      });
}

// ---------------------------------------------------------------------------------------------
// In-place ops

TEST(Elementwise, InPlaceArithmeticWithTensors) {
  Tensor x = F32({1, 2, 3});
  Tensor& ref = x.add_(F32({1, 1, 1}));
  EXPECT_EQ(&ref, &x);  // in-place ops return *this
  ExpectFloats(x, {2, 3, 4});
  x.sub_(F32({1, 2, 3}), 2);  // x - 2 * y
  ExpectFloats(x, {0, -1, -2});
  lazyx::mark_step();
  ExpectFloats(x, {0, -1, -2});
  x.add_(F32({2, 2, 2}), 0.5);
  x.mul_(F32({3, -1, 2}));
  lazyx::mark_step();
  ExpectFloats(x, {3, 0, -2});
  x.div_(F32({2, 4, -8}));
  ExpectFloats(x, {1.5, 0, 0.25});
  x.sub_(F32({1, 1, 1}));
  lazyx::mark_step();
  ExpectFloats(x, {0.5, -1, -0.75});
  EXPECT_DTYPE(x, kFloat32);
  EXPECT_EQ(x.shape(), (Shape{3}));
}

TEST(Elementwise, InPlaceArithmeticWithScalars) {
  Tensor x = F32({1, 2, 4});
  x.add_(1);
  x.add_(2, 3);  // x + 2 * 3
  ExpectFloats(x, {8, 9, 11});
  x.sub_(1, 2);  // x - 1 * 2
  lazyx::mark_step();
  ExpectFloats(x, {6, 7, 9});
  x.mul_(0.5);
  x.div_(2);
  ExpectFloats(x, {1.5, 1.75, 2.25});
  x.sub_(0.25);
  lazyx::mark_step();
  ExpectFloats(x, {1.25, 1.5, 2});
}

TEST(Elementwise, CompoundAssignmentOperators) {
  Tensor x = F32({1, 2, 3, 4}, {2, 2});
  Tensor y = F32({1, -1}, {1, 2});  // broadcasts over rows
  x += y;
  ExpectFloats(x, {2, 1, 4, 3});
  x *= 3;
  lazyx::mark_step();
  ExpectFloats(x, {6, 3, 12, 9});
  x -= 1.5;
  x /= y;
  ExpectFloats(x, {4.5, -1.5, 10.5, -7.5});
  x -= y;
  lazyx::mark_step();
  ExpectFloats(x, {3.5, -0.5, 9.5, -6.5});
  x *= y;
  x /= 0.5;
  x += 1;
  lazyx::mark_step();
  ExpectFloats(x, {8, 2, 20, 14});
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
}

TEST(Elementwise, CompoundAssignmentWithoutStepInBetween) {
  // The whole chain is pending until the read.
  Tensor x = F32({2, 4});
  x += 1;
  x *= 3;
  x -= F32({1, 1});
  x /= 2;
  ExpectFloats(x, {4, 7});
  x += 1;
  x *= 3;
  lazyx::mark_step();
  ExpectFloats(x, {15, 24});
}

TEST(Elementwise, InPlaceIntegerOps) {
  Tensor x = I64({1, 2, 3});
  x += 2;
  x *= I64({2, 2, -1});
  x -= 1;
  ExpectInts(x, {5, 7, -6});
  lazyx::mark_step();
  EXPECT_DTYPE(x, kInt64);
  ExpectInts(x, {5, 7, -6});
  // An int32 tensor accepts int64 operands (int64 can be cast to int32 in place).
  Tensor y = lazyx::tensor<int32_t>({1, 2});
  y += I64({10, 20});
  EXPECT_DTYPE(y, kInt32);
  ExpectInts(y, {11, 22});
}

TEST(Elementwise, InPlaceKeepsDtypeOfTarget) {
  // A float16 tensor updated with float32 values stays float16 (result rounded to f16).
  Tensor h = F32({1, 2}).to(kFloat16);
  h += F32({0.1f, 0.1f});
  EXPECT_DTYPE(h, kFloat16);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1.099609375f, 2.099609375f}));
  // A float tensor updated with int values stays float.
  Tensor f = F32({0.5, 1.5});
  f += I64({1, 2});
  f *= 2;
  lazyx::mark_step();
  EXPECT_DTYPE(f, kFloat32);
  ExpectFloats(f, {3, 7});
}

TEST(Elementwise, InPlaceCannotCastFloatResultIntoInt) {
  // torch: "result type Float can't be cast to the desired output type Long".
  Tensor x = I64({1, 2});
  EXPECT_THROW(x += 1.5, lazyx::Error);
  EXPECT_THROW(x /= 2, lazyx::Error);  // true division gives float
  EXPECT_THROW(x.add_(F32({1, 1})), lazyx::Error);
  EXPECT_THROW(x.sqrt_(), lazyx::Error);
  // A failed call leaves the tensor as it was.
  EXPECT_DTYPE(x, kInt64);
  ExpectInts(x, {1, 2});
  lazyx::mark_step();
  ExpectInts(x, {1, 2});
}

TEST(Elementwise, InPlaceCannotBroadcastTheTarget) {
  Tensor x = F32({1, 2});
  EXPECT_THROW(x += F32({1, 2, 3, 4}, {2, 2}), lazyx::Error);
  EXPECT_EQ(x.shape(), (Shape{2}));
  ExpectFloats(x, {1, 2});
}

TEST(Elementwise, InPlaceUnaryOps) {
  Tensor a = F32({-2, 3});
  a.neg_();
  ExpectFloats(a, {2, -3});
  a.abs_();
  lazyx::mark_step();
  ExpectFloats(a, {2, 3});

  Tensor b = F32({0, 1});
  b.exp_();
  ExpectFloats(b, {1, 2.7182817f});
  b.log_();
  lazyx::mark_step();
  ExpectFloats(b, {0, 1});

  Tensor c = F32({4, 16});
  c.sqrt_();
  ExpectFloats(c, {2, 4});
  c.rsqrt_();
  lazyx::mark_step();
  ExpectFloats(c, {0.70710678f, 0.5});

  Tensor d = F32({0, 0.5});
  d.tanh_();
  lazyx::mark_step();
  ExpectFloats(d, {0, 0.46211716f});
  d.sigmoid_();  // sigmoid(0) = 0.5, sigmoid(0.46211716) = 0.61351627
  ExpectFloats(d, {0.5, 0.61351627f});

  Tensor e = F32({-1, 2});
  e.relu_();
  ExpectFloats(e, {0, 2});
  e.pow_(3);
  lazyx::mark_step();
  ExpectFloats(e, {0, 8});
  e.clamp_(1, 5);
  ExpectFloats(e, {1, 5});

  Tensor f = F32({0, 1.5707964f});
  f.sin_();
  ExpectFloats(f, {0, 1});
  f.cos_();  // cos(0) = 1, cos(1) = 0.54030231
  lazyx::mark_step();
  ExpectFloats(f, {1, 0.54030231f});
}

TEST(Elementwise, InPlaceOpsChainAcrossSteps) {
  Tensor x = F32({1, 2});
  for (int i = 0; i < 3; ++i) {
    x.mul_(2).add_(1);  // in-place ops return *this, so they chain
    lazyx::mark_step();
  }
  // 1 -> 3 -> 7 -> 15; 2 -> 5 -> 11 -> 23.
  ExpectFloats(x, {15, 23});
}

TEST(Elementwise, OutOfPlaceOpsLeaveInputsUnchanged) {
  Tensor x = F32({1, 2});
  Tensor y = x + 1;
  Tensor z = x.neg();
  Tensor w = x.clamp(0, 1.5);
  lazyx::mark_step();
  ExpectFloats(x, {1, 2});
  ExpectFloats(y, {2, 3});
  ExpectFloats(z, {-1, -2});
  ExpectFloats(w, {1, 1.5});
}

TEST(Elementwise, ReadOfHandleCopySeesInPlaceUpdate) {
  // Copies of a handle are the same tensor.
  Tensor x = F32({1, 2});
  Tensor alias = x;
  x += 10;
  ExpectFloats(alias, {11, 12});
  alias *= 2;
  lazyx::mark_step();
  ExpectFloats(x, {22, 24});
}

// ---------------------------------------------------------------------------------------------
// Edge cases

TEST(Elementwise, ClampEdgeCases) {
  // min > max sets every element to max, as torch.clamp; nan stays nan.
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}).clamp(2.5, 1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 1, 1});
      });
  BeforeAndAfterStep(
      [] {
        return F32({kNan, 0.5, -3}).clamp(0, 1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {kNan, 0.5, 0});
      });
}

TEST(Elementwise, PowOfNegativeBase) {
  BeforeAndAfterStep(
      [] {
        return I64({-2, 3}).pow(3);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {-8, 27});
      });
  BeforeAndAfterStep(
      [] {
        return F32({-2, -8}).pow(F32({2, 0.5}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {4, kNan});
      });
}

TEST(Elementwise, BoolSubtractionAndNegationRaise) {
  // torch: "Subtraction, the `-` operator, with a bool tensor is not supported" (and the same
  // for negation).
  Tensor b = lazyx::tensor<bool>({true, false});
  EXPECT_THROW(b - b, lazyx::Error);
  EXPECT_THROW(b.neg(), lazyx::Error);
  EXPECT_THROW(-b, lazyx::Error);
}

TEST(Elementwise, ComparisonOfBoolWithInt) {
  BeforeAndAfterStep(
      [] {
        return lazyx::tensor<bool>({true, false}).eq(I64({1, 1}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kBool);
        ExpectBools(r, {true, false});
      });
}

TEST(Elementwise, EmptyTensorsBroadcast) {
  BeforeAndAfterStep(
      [] {
        return lazyx::zeros({0, 3}) + lazyx::ones({3});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{0, 3}));
        EXPECT_EQ(r.numel(), 0);
        EXPECT_TRUE(r.to_vector<float>().empty());
      });
}

TEST(Elementwise, ResultTracedBeforeInPlaceUpdateKeepsOldValue) {
  // y reads x's value before the update; the update must not leak into y (nor may x's buffer
  // be reused for x's new value before y has read it).
  Tensor x = F32({1, 2, 3});
  Tensor y = x * 1;
  Tensor z = x.exp();
  x.add_(10);
  lazyx::mark_step();
  ExpectFloats(y, {1, 2, 3});
  ExpectFloats(z, {2.7182817f, 7.3890561f, 20.085537f});
  ExpectFloats(x, {11, 12, 13});
  // Again with x materialized by the step.
  Tensor w = x * 2;
  x.zero_();
  x += 1;
  lazyx::mark_step();
  ExpectFloats(w, {22, 24, 26});
  ExpectFloats(x, {1, 1, 1});
}

TEST(Elementwise, GeluTails) {
  // gelu(-3) = -3 Phi(-3), gelu(3) = 3 Phi(3), gelu(-10) ~ -7.6e-23.
  BeforeAndAfterStep(
      [] {
        return F32({-3, 3, -10}).gelu();
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-0.0040496941f, 2.9959503f, 0});
      });
}

}  // namespace
