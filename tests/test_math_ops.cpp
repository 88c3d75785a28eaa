// The math ops (lazyx/math.h) on every built backend against values computed here with std::
// functions in long double (or known constants): special values (inf, NaN, -0), integer
// dtypes, broadcasting, and the errors for unsupported dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "math_test_util.h"

namespace {

using namespace lazyx;
using LD = long double;

using namespace lazyx::math_test;

struct Unary {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<LD(LD)> ref;
  std::vector<double> in;
};

std::vector<Unary> unary_cases() {
  const std::vector<double> any = {-kInfD, -30.5, -2.5, -1.5, -0.5, -0.0,  0.0,  1e-7,
                                   0.5,    1.5,   2.5,  3.7,  30.5, kInfD, kNanD};
  const std::vector<double> unit = {-1.0, -0.999, -0.5, -1e-8, -0.0, 0.0,
                                    0.25, 0.999,  1.0,  1.5,   kNanD};
  const std::vector<double> pos = {0.0, 1e-30, 1e-5, 0.5, 1.0, 2.0, 1e10, 1e30, kInfD, -1.0, kNanD};
  return {
      {"floor", [](const Tensor& x) { return floor(x); }, [](LD x) { return std::floor(x); }, any},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](LD x) { return std::ceil(x); }, any},
      {"trunc", [](const Tensor& x) { return trunc(x); }, [](LD x) { return std::trunc(x); }, any},
      // Half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0.
      {"round", [](const Tensor& x) { return round(x); },
       [](LD x) {
         LD f = std::floor(x), d = x - f;
         if (d != 0.5L) return std::copysign(std::round(x), x);
         return std::copysign(std::fmod(f, 2.0L) == 0 ? f : f + 1, x);
       },
       any},
      {"log1p",
       [](const Tensor& x) { return log1p(x); },
       [](LD x) { return std::log1p(x); },
       {-1.0, -0.5, -1e-10, -0.0, 0.0, 1e-10, 1.0, 1e30, kInfD, -2.0, kNanD}},
      {"expm1",
       [](const Tensor& x) { return expm1(x); },
       [](LD x) { return std::expm1(x); },
       {-kInfD, -30.0, -1e-10, -0.0, 0.0, 1e-10, 1.0, 20.0, kNanD}},
      {"log2", [](const Tensor& x) { return log2(x); }, [](LD x) { return std::log2(x); }, pos},
      {"log10", [](const Tensor& x) { return log10(x); }, [](LD x) { return std::log10(x); }, pos},
      {"exp2",
       [](const Tensor& x) { return exp2(x); },
       [](LD x) { return std::exp2(x); },
       {-kInfD, -100.0, -0.5, 0.0, 0.5, 10.0, 100.0, kNanD}},
      {"erf", [](const Tensor& x) { return erf(x); }, [](LD x) { return std::erf(x); }, any},
      {"erfc",
       [](const Tensor& x) { return erfc(x); },
       [](LD x) { return std::erfc(x); },
       {-kInfD, -3.0, -0.5, 0.0, 0.5, 3.0, 9.0, kInfD, kNanD}},
      {"tan",
       [](const Tensor& x) { return tan(x); },
       [](LD x) { return std::tan(x); },
       {-3.0, -1.0, -0.0, 0.0, 0.5, 1.2, 10.0, kInfD, kNanD}},
      {"asin", [](const Tensor& x) { return asin(x); }, [](LD x) { return std::asin(x); }, unit},
      {"acos", [](const Tensor& x) { return acos(x); }, [](LD x) { return std::acos(x); }, unit},
      {"atan", [](const Tensor& x) { return atan(x); }, [](LD x) { return std::atan(x); }, any},
      {"sinh", [](const Tensor& x) { return sinh(x); }, [](LD x) { return std::sinh(x); }, any},
      {"cosh", [](const Tensor& x) { return cosh(x); }, [](LD x) { return std::cosh(x); }, any},
      {"asinh", [](const Tensor& x) { return asinh(x); }, [](LD x) { return std::asinh(x); }, any},
      {"acosh",
       [](const Tensor& x) { return acosh(x); },
       [](LD x) { return std::acosh(x); },
       {1.0, 1.5, 10.0, 1e10, kInfD, 0.5, kNanD}},
      {"atanh", [](const Tensor& x) { return atanh(x); }, [](LD x) { return std::atanh(x); }, unit},
      {"lgamma",
       [](const Tensor& x) { return lgamma(x); },
       [](LD x) { return std::lgamma(x); },
       {-2.5, -0.5, 0.5, 1.0, 2.0, 3.5, 100.0, 1e10, kInfD, kNanD}},
      {"sinc",
       [](const Tensor& x) { return sinc(x); },
       [](LD x) {
         const LD pi = 3.141592653589793238462643383279502884L;
         return x == 0 ? 1.0L : std::sin(pi * x) / (pi * x);
       },
       {-2.5, -0.5, -0.0, 0.0, 1e-3, 0.5, 1.5, kNanD}},
  };
}

TEST(MathOps, UnaryFloat64AgainstLongDouble) {
  on_each_backend([] {
    for (const Unary& c : unary_cases()) {
      std::vector<double> want;
      for (double x : c.in) want.push_back(static_cast<double>(c.ref(x)));
      Tensor r = c.op(lazyx::tensor<double>(c.in));
      EXPECT_EQ(r.dtype(), kFloat64) << c.name;
      expect_close(r.to_vector<double>(), want, 4e-15, c.name);
    }
  });
}

TEST(MathOps, UnaryFloat32WithinAFewUlp) {
  on_each_backend([] {
    for (const Unary& c : unary_cases()) {
      std::vector<float> in;
      std::vector<double> want;
      for (double x : c.in) {
        in.push_back(static_cast<float>(x));
        want.push_back(static_cast<double>(static_cast<float>(c.ref(static_cast<float>(x)))));
      }
      Tensor r = c.op(lazyx::tensor<float>(in));
      EXPECT_EQ(r.dtype(), kFloat32) << c.name;
      // 4 ULP (Sleef's fast variants); sinc multiplies by pi in float32 first, as eager.
      double rel = std::string(c.name) == "sinc" ? 1e-5 : 4.8e-7;
      expect_close(r.to_vector<double>(), want, rel, c.name);
    }
  });
}

TEST(MathOps, RoundingKeepsIntegersAndFloatFunctionsPromoteThem) {
  on_each_backend([] {
    Tensor i = lazyx::tensor<int64_t>({-7, 0, 9});
    for (const Tensor& r : {floor(i), ceil(i), round(i), trunc(i)}) {
      EXPECT_EQ(r.dtype(), kInt64);
      EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{-7, 0, 9}));
    }
    Tensor l = log1p(lazyx::tensor<int32_t>({0, 1}));
    EXPECT_EQ(l.dtype(), kFloat32);
    expect_close(l.to_vector<double>(), {0.0, static_cast<double>(std::log1p(1.0f))}, 1e-7,
                 "log1p(int)");
    // round with decimals: half to even after scaling, as eager.
    expect_close(round(lazyx::tensor<double>({1.2345, -2.5, 1250.0}), 2).to_vector<double>(),
                 {1.23, -2.5, 1250.0}, 1e-15, "round(2)");
    expect_close(round(lazyx::tensor<double>({1250.0, 1350.0}), -2).to_vector<double>(),
                 {1200.0, 1400.0}, 1e-15, "round(-2)");
    expect_close(frac(lazyx::tensor<double>({-2.75, 3.5})).to_vector<double>(), {-0.75, 0.5}, 0,
                 "frac");
  });
}

TEST(MathOps, SignSignbitAndTests) {
  on_each_backend([] {
    Tensor x = lazyx::tensor<float>({-2.0f, -0.0f, 0.0f, 3.0f, INFINITY, -INFINITY, NAN});
    expect_close(sign(x).to_vector<double>(), {-1, 0, 0, 1, 1, -1, 0}, 0, "sign");
    EXPECT_EQ(signbit(x).to_vector<bool>(),
              (std::vector<bool>{true, true, false, false, false, true, false}));
    EXPECT_EQ(isposinf(x).to_vector<bool>(),
              (std::vector<bool>{false, false, false, false, true, false, false}));
    EXPECT_EQ(isneginf(x).to_vector<bool>(),
              (std::vector<bool>{false, false, false, false, false, true, false}));
    EXPECT_EQ(isfinite(x).to_vector<bool>(),
              (std::vector<bool>{true, true, true, true, false, false, false}));
    expect_close(nan_to_num(x, 5.0, std::nullopt, -7.0).to_vector<double>(),
                 {-2, -0.0, 0, 3, std::numeric_limits<float>::max(), -7, 5}, 0, "nan_to_num");
    EXPECT_EQ(signbit(lazyx::tensor<int64_t>({-3, 0, 4})).to_vector<bool>(),
              (std::vector<bool>{true, false, false}));
  });
}

}  // namespace
