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

// The orthogonal polynomials against closed forms: T_n(cos t) = cos(nt) and its kin (the cosine
// forms at high degree and the recurrences at low degree), explicit low-order polynomials,
// cosh forms outside [-1, 1], and PyTorch's special values.
TEST(MathOpsBinary, OrthogonalPolynomialsAgainstClosedForms) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<double> ts = {0.3, 1.1, 2.9};
  const std::vector<double> ns = {3, 7, 12, 50};
  std::vector<double> xs, nv, sx;  // x = cos t, its shifted twin (1 + x) / 2, the degree
  for (double t : ts) {
    for (double n : ns) {
      xs.push_back(std::cos(t));
      sx.push_back((1 + std::cos(t)) / 2);
      nv.push_back(n);
    }
  }
  auto closed = [&](int kind) {
    std::vector<double> r;
    for (double t : ts) {
      for (double n : ns) {
        LD tl = std::acos(static_cast<LD>(std::cos(t))), nl = n;
        LD v = kind == 0   ? std::cos(nl * tl)
               : kind == 1 ? std::sin((nl + 1) * tl) / std::sin(tl)
               : kind == 2 ? std::cos((nl + 0.5L) * tl) / std::cos(tl / 2)
                           : std::sin((nl + 0.5L) * tl) / std::sin(tl / 2);
        r.push_back(static_cast<double>(v));
      }
    }
    return r;
  };
  const Fn plain[] = {chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
                      chebyshev_polynomial_w};
  const Fn shifted[] = {shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
                        shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w};
  on_each_backend([&] {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE("chebyshev kind " + std::to_string(kind));
      // Near a root the rounding of n t (n ulp) dominates: absolute tolerances.
      std::vector<double> got = plain[kind](F64(xs), F64(nv)).to_vector<double>();
      std::vector<double> want = closed(kind);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
      // The shifted x rounds once more (U_50's slope is ~4e4).
      got = shifted[kind](F64(sx), F64(nv)).to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-10) << i;
    }
    // Outside [-1, 1]: T_n(cosh u) = cosh(nu), U_n(cosh u) = sinh((n+1)u) / sinh(u).
    const LD u = std::acosh(1.5L);
    expect_close(chebyshev_polynomial_t(F64({1.5, -1.5}), F64({20, 21})).to_vector<double>(),
                 {static_cast<double>(std::cosh(20 * u)), static_cast<double>(-std::cosh(21 * u))},
                 1e-13, "T outside");
    expect_close(chebyshev_polynomial_u(F64({1.5}), F64({20})).to_vector<double>(),
                 {static_cast<double>(std::sinh(21 * u) / std::sinh(u))}, 1e-13, "U outside");
    // Endpoints, negative, fractional (truncated) and NaN degrees, T_0(NaN) = 1.
    expect_close(chebyshev_polynomial_t(F64({1, -1, -1, 0.5, 0.5, 0.5, 0.5, kNanD, kNanD}),
                                        F64({5, 5, 4, -1, -0.5, 2.7, kNanD, 0, 1}))
                     .to_vector<double>(),
                 {1, -1, 1, 0, 1, -0.5, 0, 1, kNanD}, 0, "T special values");
    expect_close(chebyshev_polynomial_u(F64({1, -1}), F64({5, 5})).to_vector<double>(), {6, -6}, 0,
                 "U at +-1");
    expect_close(chebyshev_polynomial_v(F64({1, -1}), F64({5, 5})).to_vector<double>(), {1, -11}, 0,
                 "V at +-1");
    expect_close(chebyshev_polynomial_w(F64({1, -1}), F64({5, 5})).to_vector<double>(), {11, -1}, 0,
                 "W at +-1");
    expect_close(shifted_chebyshev_polynomial_v(F64({0, 1}), F64({3, 3})).to_vector<double>(),
                 {-7, 1}, 0, "shifted V at 0 and 1");
    // Explicit polynomials: H_4, He_4, L_3, P_4 at points inside and outside [-1, 1].
    const std::vector<double> p = {-2.5, -0.3, 0.0, 0.7, 3.0};
    std::vector<double> h, he, l, leg;
    for (LD x : {-2.5L, -0.3L, 0.0L, 0.7L, 3.0L}) {
      const LD x2 = x * x;
      h.push_back(static_cast<double>(16 * x2 * x2 - 48 * x2 + 12));
      he.push_back(static_cast<double>(x2 * x2 - 6 * x2 + 3));
      l.push_back(static_cast<double>((-x2 * x + 9 * x2 - 18 * x + 6) / 6));
      leg.push_back(static_cast<double>((35 * x2 * x2 - 30 * x2 + 3) / 8));
    }
    expect_close(hermite_polynomial_h(F64(p), 4.0).to_vector<double>(), h, 1e-13, "H_4");
    expect_close(hermite_polynomial_he(F64(p), 4.0).to_vector<double>(), he, 1e-13, "He_4");
    expect_close(laguerre_polynomial_l(F64(p), 3.0).to_vector<double>(), l, 1e-13, "L_3");
    expect_close(legendre_polynomial_p(F64(p), 4.0).to_vector<double>(), leg, 1e-13, "P_4");
    expect_close(
        legendre_polynomial_p(F64({1, -1, -1, 0.3}), F64({7, 7, 8, -2})).to_vector<double>(),
        {1, -1, 1, 0}, 0, "P special values");
    expect_close(laguerre_polynomial_l(F64({0.0, kNanD}), F64({9, 0})).to_vector<double>(), {1, 1},
                 0, "L_n(0) = 1, L_0(NaN) = 1");
    expect_close(hermite_polynomial_h(F64({0.5, 0.5}), F64({-3, 0})).to_vector<double>(), {0, 1}, 0,
                 "H special values");
  });
}

// Hurwitz zeta and P(a, x), Q(a, x) against closed forms (zeta(2, 1) = pi^2/6, P(1, x) =
// 1 - e^-x, P(1/2, x) = erf(sqrt x), Q(n, x) as a Poisson sum), values from mpmath for large a,
// and PyTorch's boundary values.
TEST(MathOpsBinary, ZetaAndIncompleteGammaAgainstKnownValues) {
  const LD zeta3 = 1.2020569031595942853997381615114L;
  on_each_backend([&] {
    expect_close(
        zeta(F64({2, 4, 2, 3, 2, 1.5, 1 + 1e-8}), F64({1, 1, 0.5, -1.5, 1e-3, 100, 2}))
            .to_vector<double>(),
        {static_cast<double>(kPiL * kPiL / 6), static_cast<double>(std::pow(kPiL, 4) / 90),
         static_cast<double>(kPiL * kPiL / 2), static_cast<double>(-1 / 3.375L - 8 + 7 * zeta3),
         1000001.6425331958273, 0.20050124998177190742, 100000000.18496276642},
        2e-14, "zeta");
    expect_close(zeta(F64({1, 0.5, 2, 2, 2.5, kInfD, kInfD, kInfD, 2, 2, kNanD, 1e300}),
                      F64({1, 1, 0, -1, -1.5, 1, 0.5, 2, kInfD, -kInfD, 1, 2}))
                     .to_vector<double>(),
                 {kInfD, kNanD, kInfD, kInfD, kNanD, 1, kInfD, kNanD, kNanD, kInfD, kNanD, kNanD},
                 0, "zeta special values");
    const std::vector<double> x = {1e-3, 0.5, 2.0, 7.5, 40.0};
    std::vector<double> p1, q1, ph, qh, p3;
    for (LD v : {1e-3L, 0.5L, 2.0L, 7.5L, 40.0L}) {
      p1.push_back(static_cast<double>(-std::expm1(-v)));
      q1.push_back(static_cast<double>(std::exp(-v)));
      ph.push_back(static_cast<double>(std::erf(std::sqrt(v))));
      qh.push_back(static_cast<double>(std::erfc(std::sqrt(v))));
      p3.push_back(static_cast<double>(1 - std::exp(-v) * (1 + v + v * v / 2)));
    }
    expect_close(igamma(1.0, F64(x)).to_vector<double>(), p1, 1e-14, "P(1, x)");
    expect_close(igammac(1.0, F64(x)).to_vector<double>(), q1, 1e-13, "Q(1, x)");
    expect_close(igamma(0.5, F64(x)).to_vector<double>(), ph, 1e-14, "P(1/2, x)");
    expect_close(igammac(0.5, F64(x)).to_vector<double>(), qh, 1e-12, "Q(1/2, x)");
    // The closed form cancels at x = 1e-3 (P = 1.7e-10): long double keeps 1e-9 of it.
    expect_close(igamma(3.0, F64(x)).to_vector<double>(), p3, 1e-6, "P(3, x)");
    // Q(50, 45) = sum_{k<50} e^-45 45^k / k!.
    LD poisson = 0, term = std::exp(-45.0L);
    for (int k = 0; k < 50; ++k) {
      poisson += term;
      term *= 45.0L / (k + 1);
    }
    expect_close(igammac(F64({50, 0.01, 20.5, 500, 1e5, 2e6, 1e7}),
                         F64({45, 0.5, 30, 480, 1e5 - 300, 2e6 + 1000, 1e7 + 1}))
                     .to_vector<double>(),
                 {static_cast<double>(poisson), 0.005626756193967184147, 0.027940952432154163729,
                  0.81371802680967539934, 0.8285826854854970772, 0.2397134390530637546,
                  0.49983179117463703983},
                 1e-12, "Q(a, x)");
    // Boundaries: NaN outside a, x >= 0 and at (0, 0); a = 0 gives P = 1 for x > 0; x = 0 gives
    // P = 0 even for a NaN a; infinities.
    const std::vector<double> a = {0, 0, 1, kNanD, kInfD, kInfD, 1, -1, 1, 0, kNanD, kInfD, kNanD};
    const std::vector<double> b = {0, 1, 0, 0, 1, kInfD, kInfD, 1, -1, kNanD, 1, kNanD, kInfD};
    expect_close(igamma(F64(a), F64(b)).to_vector<double>(),
                 {kNanD, 1, 0, 0, 0, kNanD, 1, kNanD, kNanD, kNanD, kNanD, 0, 1}, 0,
                 "P boundaries");
    expect_close(igammac(F64(a), F64(b)).to_vector<double>(),
                 {kNanD, 0, 1, 1, 1, kNanD, 0, kNanD, kNanD, kNanD, kNanD, 1, 0}, 0,
                 "Q boundaries");
  });
}

// Ai against values from mpmath across the series, Bessel and asymptotic ranges, at zeros of Ai,
// and PyTorch's special values (NaN at +-inf, 0 where the value underflows).
TEST(MathOpsBinary, AiryAiAgainstKnownValues) {
  on_each_backend([] {
    expect_close(airy_ai(F64({0, 1, -1, 2, -2, 2.5, -2.5, 5, -5, 8.5, -8.5, 9, -9, 10, -30, 50}))
                     .to_vector<double>(),
                 {0.355028053887817239260, 0.13529241631288141552, 0.5355608832923521188,
                  0.034924130423274379135, 0.22740742820168557599, 0.015725923380470489995,
                  -0.11232506769296608919, 0.00010834442813607441735, 0.35076100902411431979,
                  1.0997009755195506509e-8, -0.33029023763020887902, 2.4711684308724898433e-9,
                  -0.022133721547341403674, 1.1047532552898685934e-10, -0.087968188456842162833,
                  4.5849417240748284783e-104},
                 1e-13, "airy_ai");
    // The first, fifth and tenth zeros.
    std::vector<double> z =
        airy_ai(F64({-2.338107410459767, -9.022650853340981, -12.828776752865757}))
            .to_vector<double>();
    for (double v : z) EXPECT_LT(std::fabs(v), 1e-14);
    expect_close(airy_ai(F64({kInfD, -kInfD, kNanD, 200})).to_vector<double>(),
                 {kNanD, kNanD, kNanD, 0}, 0, "airy_ai special values");
    // Integers promote to float32.
    Tensor r = airy_ai(I64({0, 1}));
    EXPECT_EQ(r.dtype(), kFloat32);
    expect_close(r.to_vector<double>(), {0.35502805f, 0.13529241f}, 1e-7, "airy_ai int64");
  });
}

// SpecialFn2 takes PyTorch's promotion (integers and bool give float32, float32 with a Python
// number stays float32) and broadcasts.
TEST(MathOpsBinary, SpecialFn2PromotesAndBroadcasts) {
  on_each_backend([] {
    Tensor x = lazyx::tensor<float>({0.5f, -2.0f}, {2, 1});
    Tensor n = I64({0, 1, 2});
    Tensor r = hermite_polynomial_he(x, n);
    EXPECT_EQ(r.shape(), (Shape{2, 3}));
    EXPECT_EQ(r.dtype(), kFloat32);
    expect_close(r.to_vector<double>(), {1, 0.5, -0.75, 1, -2, 3}, 0, "He broadcast");
    EXPECT_EQ(chebyshev_polynomial_t(I64({2}), I64({3})).dtype(), kFloat32);
    expect_close(chebyshev_polynomial_t(I64({2}), I64({3})).to_vector<double>(), {26}, 0, "T int");
    EXPECT_EQ(zeta(lazyx::tensor<bool>({true}), 2.0).dtype(), kFloat32);
    EXPECT_EQ(zeta(2, F64({2})).dtype(), kFloat64);
    EXPECT_EQ(igamma(lazyx::tensor<float>({1.0f}), 2.0).dtype(), kFloat32);
    // float32 results round the double computation once.
    expect_close(
        igammac(lazyx::tensor<float>({1.0f}), lazyx::tensor<float>({2.0f})).to_vector<double>(),
        {static_cast<float>(std::exp(-2.0))}, 0, "Q float32");
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
