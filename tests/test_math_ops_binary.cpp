// The binary and special math ops (lazyx/math.h) on every built backend against values
// computed here (long double, or known constants): signs of zeros and remainders, integer
// division, bitwise ops, broadcasting, special functions and errors.
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

constexpr LD kPiL = 3.141592653589793238462643383279502884L;
using namespace lazyx::math_test;

Tensor F64(const std::vector<double>& v) { return lazyx::tensor<double>(v); }
Tensor I64(const std::vector<int64_t>& v) { return lazyx::tensor<int64_t>(v); }

TEST(MathOpsBinary, FloatBinaryOpsAgainstLongDouble) {
  const std::vector<double> a = {-7.5, -7.5, 7.5, 7.5, -0.0, 0.0, 5.0, kInfD, 3.0, kNanD, 1e300};
  const std::vector<double> b = {2.0, -2.0, 2.0, -2.0, 3.0, -3.0, kInfD, 2.0, 0.0, 1.0, 1e300};
  struct C {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<LD(LD, LD)> ref;
  };
  std::vector<C> cs = {
      {"atan2", [](const Tensor& x, const Tensor& y) { return atan2(x, y); },
       [](LD x, LD y) { return std::atan2(x, y); }},
      {"hypot", [](const Tensor& x, const Tensor& y) { return hypot(x, y); },
       [](LD x, LD y) { return std::hypot(x, y); }},
      {"copysign", [](const Tensor& x, const Tensor& y) { return copysign(x, y); },
       [](LD x, LD y) { return std::copysign(x, y); }},
      {"fmod", [](const Tensor& x, const Tensor& y) { return fmod(x, y); },
       [](LD x, LD y) { return std::fmod(x, y); }},
      // Python's %: the divisor's sign.
      {"remainder", [](const Tensor& x, const Tensor& y) { return remainder(x, y); },
       [](LD x, LD y) {
         LD m = std::fmod(x, y);
         return (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
       }},
  };
  on_each_backend([&] {
    for (const C& c : cs) {
      std::vector<double> want;
      for (size_t i = 0; i < a.size(); ++i) want.push_back(static_cast<double>(c.ref(a[i], b[i])));
      expect_close(c.op(F64(a), F64(b)).to_vector<double>(), want, 4e-15, c.name);
    }
    // Python's floor division of floats, including signed zeros and a zero divisor.
    expect_close(floor_divide(F64({7.5, -7.5, 7.5, -0.5, 0.5, 1.0, -1.0}),
                              F64({2.0, 2.0, -2.0, 3.0, -3.0, 0.0, 0.0}))
                     .to_vector<double>(),
                 {3.0, -4.0, -4.0, -1.0, -1.0, kInfD, -kInfD}, 0, "floor_divide");
    expect_close(trunc_divide(F64({7.5, -7.5}), F64({2.0, 2.0})).to_vector<double>(), {3.0, -3.0},
                 0, "trunc_divide");
    // nextafter in float32 steps by one float32 ULP.
    Tensor n = nextafter(lazyx::tensor<float>({1.0f, 1.0f, 0.0f}),
                         lazyx::tensor<float>({2.0f, 0.0f, 1.0f}));
    EXPECT_EQ(n.to_vector<float>(),
              (std::vector<float>{std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f),
                                  std::nextafter(0.0f, 1.0f)}));
  });
}

TEST(MathOpsBinary, IntegerDivisionRemainderAndBitwise) {
  on_each_backend([] {
    Tensor a = I64({7, -7, 7, -7, 6, 5, INT64_MIN});
    Tensor b = I64({2, 2, -2, -2, 3, 7, -1});
    // INT64_MIN / -1 wraps.
    EXPECT_EQ(floor_divide(a, b).to_vector<int64_t>(),
              (std::vector<int64_t>{3, -4, -4, 3, 2, 0, INT64_MIN}));
    EXPECT_EQ(trunc_divide(a, b).to_vector<int64_t>(),
              (std::vector<int64_t>{3, -3, -3, 3, 2, 0, INT64_MIN}));
    EXPECT_EQ(remainder(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, -1, -1, 0, 5, 0}));
    EXPECT_EQ(fmod(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 1, -1, 0, 5, 0}));
    // A zero divisor raises when the step runs, as in eager, and the step changes nothing.
    using Div = Tensor (*)(const Tensor&, const Tensor&);
    for (Div f : {static_cast<Div>(floor_divide), static_cast<Div>(trunc_divide),
                  static_cast<Div>(remainder), static_cast<Div>(fmod)}) {
      Tensor w = I64({10, 20});
      mark_step();
      w.add_(1);  // pending, would be donated
      Tensor bad = f(w, I64({4, 0}));
      EXPECT_THROW(mark_step(), Error);
      EXPECT_TRUE(w.is_pending());
      bad = Tensor();
      mark_step();
      EXPECT_EQ(w.to_vector<int64_t>(), (std::vector<int64_t>{11, 21}));
    }
    Tensor x = lazyx::tensor<int32_t>({0b1100, -1, 0x7fffffff});
    Tensor y = lazyx::tensor<int32_t>({0b1010, 5, 1});
    EXPECT_EQ(bitwise_and(x, y).to_vector<int32_t>(), (std::vector<int32_t>{0b1000, 5, 1}));
    EXPECT_EQ(bitwise_or(x, y).to_vector<int32_t>(),
              (std::vector<int32_t>{0b1110, -1, 0x7fffffff}));
    EXPECT_EQ(bitwise_xor(x, y).to_vector<int32_t>(),
              (std::vector<int32_t>{0b0110, -6, 0x7ffffffe}));
    EXPECT_EQ(bitwise_not(x).to_vector<int32_t>(), (std::vector<int32_t>{~0b1100, 0, INT32_MIN}));
    EXPECT_EQ(bitwise_and(x, 6).to_vector<int32_t>(), (std::vector<int32_t>{4, 6, 6}));
    EXPECT_EQ(bitwise_and(x, 6).dtype(), kInt32);
    Tensor t = lazyx::tensor<bool>({true, true, false});
    Tensor f = lazyx::tensor<bool>({true, false, false});
    EXPECT_EQ(bitwise_not(t).to_vector<bool>(), (std::vector<bool>{false, false, true}));
    EXPECT_EQ(bitwise_xor(t, f).to_vector<bool>(), (std::vector<bool>{false, true, false}));
    EXPECT_EQ(bitwise_xor(t, f).dtype(), kBool);
    EXPECT_EQ(logical_xor(F64({0.0, 2.0, kNanD}), I64({1, 3, 0})).to_vector<bool>(),
              (std::vector<bool>{true, false, true}));
  });
}

TEST(MathOpsBinary, BroadcastingAndScalarPromotion) {
  on_each_backend([] {
    Tensor a = lazyx::tensor<float>({1.0f, -2.0f}, {2, 1});
    Tensor b = lazyx::tensor<float>({3.0f, -4.0f, 0.5f});
    Tensor r = atan2(a, b);
    EXPECT_EQ(r.shape(), (Shape{2, 3}));
    std::vector<double> want;
    for (float x : {1.0f, -2.0f}) {
      for (float y : {3.0f, -4.0f, 0.5f}) want.push_back(static_cast<float>(std::atan2(x, y)));
    }
    expect_close(r.to_vector<double>(), want, 4.8e-7, "atan2 broadcast");
    // An int tensor with a float scalar computes in float32; with an int scalar stays int.
    EXPECT_EQ(remainder(I64({-7, 7}), 2.5).dtype(), kFloat32);
    expect_close(remainder(I64({-7, 7}), 2.5).to_vector<double>(), {0.5, 2.0}, 0, "rem scalar");
    EXPECT_EQ(remainder(I64({-7, 7}), 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
    expect_close(copysign(2.0, F64({-0.0, 1.0})).to_vector<double>(), {-2.0, 2.0}, 0, "copysign");
  });
}

TEST(MathOpsBinary, CompositesMatchTheirDefinitions) {
  on_each_backend([] {
    Tensor a = F64({0.0, -kInfD, kInfD, 1000.0, -3.0});
    Tensor b = F64({0.0, -kInfD, 1.0, 1000.0, 2.0});
    std::vector<double> want;
    const double as[] = {0.0, -kInfD, kInfD, 1000.0, -3.0}, bs[] = {0.0, -kInfD, 1.0, 1000.0, 2.0};
    for (int i = 0; i < 5; ++i) {
      LD m = std::max<LD>(as[i], bs[i]);
      want.push_back(std::isinf(as[i]) && as[i] == bs[i]
                         ? as[i]
                         : static_cast<double>(m + std::log1p(std::exp(-std::fabs(
                                                       static_cast<LD>(as[i]) - bs[i])))));
    }
    expect_close(logaddexp(a, b).to_vector<double>(), want, 1e-15, "logaddexp");
    expect_close(
        xlogy(F64({0.0, 0.0, 2.0, 3.0}), F64({0.0, kNanD, 0.5, kInfD})).to_vector<double>(),
        {0.0, kNanD, static_cast<double>(2 * std::log(0.5L)), kInfD}, 1e-15, "xlogy");
    expect_close(xlog1py(F64({0.0, 2.0}), F64({-1.0, 1e-20})).to_vector<double>(), {0.0, 2e-20},
                 1e-15, "xlog1py");
    expect_close(heaviside(F64({-1.0, 0.0, 2.0, kNanD}), F64({0.5})).to_vector<double>(),
                 {0.0, 0.5, 1.0, 0.0}, 0, "heaviside");
    // lerp is exact at both ends.
    expect_close(
        lerp(F64({1.0, 1.0, 1.0}), F64({3.0, 3.0, 3.0}), F64({0.0, 0.25, 1.0})).to_vector<double>(),
        {1.0, 1.5, 3.0}, 0, "lerp");
    expect_close(clamp(F64({-5.0, 0.5, 5.0, kNanD}), F64({-1.0}), F64({0.0, 0.0, 1.0, 1.0}))
                     .to_vector<double>(),
                 {-1.0, 0.0, 1.0, kNanD}, 0, "clamp(tensor)");
    expect_close(entr(F64({0.0, 0.5, -1.0, kNanD})).to_vector<double>(),
                 {0.0, static_cast<double>(-0.5L * std::log(0.5L)), -kInfD, kNanD}, 1e-15, "entr");
  });
}

TEST(MathOpsBinary, SpecialFunctionsAgainstKnownValues) {
  const LD euler = 0.5772156649015328606065120900824024L;
  on_each_backend([&] {
    expect_close(digamma(F64({1.0, 0.5, 0.0, -2.0, 100.0})).to_vector<double>(),
                 {static_cast<double>(-euler), static_cast<double>(-euler - 2 * std::log(2.0L)),
                  -kInfD, kNanD, 4.600161852738087},
                 2e-15, "digamma");
    // psi(-0.5) = psi(1.5) - pi / tan(-pi/2): the sum behind psi(1.5) cancels to 0.036.
    EXPECT_NEAR(digamma(F64({-0.5})).to_vector<double>()[0], 0.03648997397857652056, 4e-16);
    expect_close(polygamma(1, F64({1.0, -0.5, 0.5})).to_vector<double>(),
                 {static_cast<double>(kPiL * kPiL / 6), static_cast<double>(kPiL * kPiL / 2 + 4),
                  static_cast<double>(kPiL * kPiL / 2)},
                 1e-14, "trigamma");
    expect_close(polygamma(2, F64({1.0})).to_vector<double>(), {-2.4041138063191885708}, 1e-14,
                 "polygamma(2)");
    Tensor e = erfinv(F64({-1.0, -0.999, -0.5, 0.0, 0.5, 0.999999, 1.0, 2.0}));
    std::vector<double> ev = e.to_vector<double>();
    expect_close({ev[0], ev[3], ev[4], ev[6], ev[7]},
                 {-kInfD, 0.0, 0.47693627620446987338, kInfD, kNanD}, 1e-15, "erfinv");
    for (double y : {-0.999, -0.5, 0.999999}) {
      size_t i = y == -0.999 ? 1 : (y == -0.5 ? 2 : 5);
      EXPECT_NEAR(static_cast<double>(std::erf(static_cast<LD>(ev[i]))), y, 4e-16) << "erf(erfinv)";
    }
    // ndtri inverts the normal CDF, deep into the tail.
    std::vector<double> p = {1e-300, 1e-10, 0.025, 0.5, 0.975};
    std::vector<double> q = ndtri(F64(p)).to_vector<double>();
    for (size_t i = 0; i < p.size(); ++i) {
      LD cdf = 0.5L * std::erfc(-static_cast<LD>(q[i]) / std::sqrt(2.0L));
      // The CDF's relative slope is about |q|: q's own rounding moves it by ~|q|^2 eps.
      EXPECT_NEAR(static_cast<double>(cdf / p[i]), 1.0, 1e-15 * (4 + q[i] * q[i]))
          << "ndtri at " << p[i];
    }
    std::vector<double> xs = {-40.0, -5.0, 0.0, 3.0};
    std::vector<double> want;
    for (double x : xs)
      want.push_back(static_cast<double>(std::log(0.5L * std::erfc(-x / std::sqrt(2.0L)))));
    expect_close(log_ndtr(F64(xs)).to_vector<double>(), want, 1e-13, "log_ndtr");
    want.clear();
    for (double x : {-2.0, 0.5, 30.0})
      want.push_back(
          static_cast<double>(std::exp(static_cast<LD>(x) * x) * std::erfc(static_cast<LD>(x))));
    expect_close(erfcx(F64({-2.0, 0.5, 30.0})).to_vector<double>(), want, 1e-14, "erfcx");
    expect_close(i0(F64({0.0, 1.0, -1.0})).to_vector<double>(),
                 {1.0, 1.2660658777520082, 1.2660658777520082}, 1e-15, "i0");
    expect_close(i1(F64({1.0, -1.0})).to_vector<double>(),
                 {0.5651591039924851, -0.5651591039924851}, 1e-15, "i1");
    // I0(x) e^-x ~ 1/sqrt(2 pi x) (1 + 1/8x + 9/128x^2) for large x.
    LD x = 1000;
    double i0e_big = static_cast<double>(
        (1 + 1 / (8 * x) + 9 / (128 * x * x) + 225 / (3072 * x * x * x)) / std::sqrt(2 * kPiL * x));
    expect_close(i0e(F64({1000.0})).to_vector<double>(), {i0e_big}, 1e-12, "i0e");
    expect_close(bessel_j1(F64({25.0, -25.0})).to_vector<double>(),
                 {static_cast<double>(std::cyl_bessel_j(1.0L, 25.0L)),
                  -static_cast<double>(std::cyl_bessel_j(1.0L, 25.0L))},
                 1e-13, "bessel_j1");
    EXPECT_LT(bessel_j1(F64({25.0})).to_vector<double>()[0], 0.0);  // J1(25) = -0.1254
  });
}

TEST(MathOpsBinary, ClearErrorsForUnsupportedDtypes) {
  EXPECT_THROW(
      {
        try {
          bitwise_and(F64({1.0}), F64({2.0}));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("[bitwise_and]"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(bitwise_not(F64({1.0})), Error);
  EXPECT_THROW(polygamma(-1, F64({1.0})), Error);
  EXPECT_THROW(nextafter(I64({1}), I64({2})), Error);
  EXPECT_THROW(remainder(lazyx::tensor<bool>({true}), lazyx::tensor<bool>({true})), Error);
}

}  // namespace
