// Special functions in double: inverse error functions by Newton's method on std::erf/erfc,
// digamma and polygamma by recurrence plus asymptotic series (Hurwitz zeta by Euler-Maclaurin),
// Bessel functions through the C++17 special math functions.
#include "backends/reference/special_functions.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lazyx::special {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// x with erfc(x) = c for c in (0, 1]: Newton's method on log(erfc(x)), which is nearly linear
// in x^2, so tiny c keep full relative precision.
double erfcinv_small(double c) {
  double x = c >= 0.5 ? (1.0 - c) * std::sqrt(kPi) / 2 : std::sqrt(-std::log(c));
  for (int it = 0; it < 100; ++it) {
    double e = std::erfc(x);
    if (e <= 0) {
      x *= 0.99;
      continue;
    }
    double g = std::log(e) - std::log(c);
    double dg = -2.0 / std::sqrt(kPi) * std::exp(-x * x) / e;
    double dx = g / dg;
    x -= dx;
    if (std::fabs(dx) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}

// x with erfc(x) = c for c in [0, 2].
double erfcinv(double c) {
  if (std::isnan(c) || c < 0 || c > 2) return kNan;
  if (c == 0) return kInf;
  if (c == 2) return -kInf;
  return c <= 1 ? erfcinv_small(c) : -erfcinv_small(2 - c);
}

// Bernoulli numbers B_2k / (2k)! for k = 1..10: the Euler-Maclaurin tail.
constexpr double kB2kOverFact[] = {1.0 / 12,
                                   -1.0 / 720,
                                   1.0 / 30240,
                                   -1.0 / 1209600,
                                   1.0 / 47900160,
                                   -691.0 / 1307674368000.0,
                                   1.0 / 74724249600.0,
                                   -3617.0 / 10670622842880000.0,
                                   43867.0 / 5109094217170944000.0,
                                   -174611.0 / 802857662698291200000.0};

// I_nu(x) * exp(-|x|) for nu = 0, 1 and x >= 0, without overflow for large x.
double scaled_bessel_i(int nu, double x) {
  if (x < 600) return std::cyl_bessel_i(static_cast<double>(nu), x) * std::exp(-x);
  // Asymptotic series: 1/sqrt(2 pi x) * sum_k (-1)^k prod_{j<=k}(4nu^2 - (2j-1)^2) / (k! (8x)^k).
  double mu = 4.0 * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 12; ++k) {
    term *= -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
    sum += term;
  }
  return sum / std::sqrt(2 * kPi * x);
}

double bessel_y(int nu, double x) {
  if (std::isnan(x)) return x;
  if (x < 0) return kNan;
  if (x == 0) return -kInf;
  return std::cyl_neumann(static_cast<double>(nu), x);
}

double bessel_k(int nu, double x, bool scaled) {
  if (std::isnan(x)) return x;
  if (x < 0) return kNan;
  if (x == 0) return kInf;
  if (x > 700) {  // asymptotic: sqrt(pi / 2x) e^-x (1 + (4nu^2 - 1) / 8x + ...)
    double mu = 4.0 * nu * nu, term = 1, sum = 1;
    for (int k = 1; k < 12; ++k) {
      term *= (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
      sum += term;
    }
    double r = std::sqrt(kPi / (2 * x)) * sum;
    return scaled ? r : r * std::exp(-x);
  }
  double r = std::cyl_bessel_k(static_cast<double>(nu), x);
  return scaled ? r * std::exp(x) : r;
}

}  // namespace

double hurwitz_zeta(double s, double q) {
  // Sum directly until q + N >= 10 (q may be negative, between poles, for integer s), or until
  // the decreasing terms, with the integral bound of the rest, no longer change the sum.
  const int kN = std::max(12, static_cast<int>(std::ceil(10 - q)));
  double sum = 0;
  for (int k = 0; k < kN; ++k) {
    const double t = std::pow(q + k, -s);
    sum += t;
    if (k > 0 && q + k > 0 && (t == 0 || t * (1 + (q + k) / (s - 1)) <= 1e-17 * std::fabs(sum))) {
      return sum;
    }
  }
  double a = q + kN;
  sum += std::pow(a, 1 - s) / (s - 1) + 0.5 * std::pow(a, -s);
  double fac = s;                   // s (s+1) ... (s+2j-2)
  double pw = std::pow(a, -s - 1);  // a^(-s-2j+1)
  for (int j = 0; j < 10; ++j) {
    double t = kB2kOverFact[j] * fac * pw;
    sum += t;
    if (std::fabs(t) < 1e-17 * std::fabs(sum)) break;
    fac *= (s + 2 * j + 1) * (s + 2 * j + 2);
    pw /= a * a;
  }
  return sum;
}

double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNan;
  if (std::fabs(y) >= 0.5) return std::copysign(erfcinv(1 - std::fabs(y)), y);
  double x = y * std::sqrt(kPi) / 2;
  for (int it = 0; it < 50; ++it) {
    double dx = (std::erf(x) - y) / (2.0 / std::sqrt(kPi) * std::exp(-x * x));
    x -= dx;
    if (std::fabs(dx) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}

double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < 0) {
    if (x < -26.7) return kInf;
    return 2 * std::exp(x * x) - erfcx(-x);
  }
  if (x < 50) {
    long double lx = x;
    return static_cast<double>(std::exp(lx * lx) * std::erfc(lx));
  }
  // 1/(x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + ...)
  double z = 1 / (2 * x * x), term = 1, sum = 1;
  for (int k = 1; k < 8; ++k) {
    term *= -(2.0 * k - 1) * z;
    sum += term;
  }
  return sum / (x * std::sqrt(kPi));
}

double ndtri(double p) { return -std::sqrt(2.0) * erfcinv(2 * p); }

double log_ndtr(double x) {
  double t = x / std::sqrt(2.0);
  if (x < -1) return std::log(erfcx(-t) / 2) - t * t;
  return std::log1p(-std::erfc(t) / 2);
}

double digamma(double x) {
  if (std::isnan(x) || x == kInf) return x;
  if (x == 0) return std::copysign(kInf, -x);
  if (x < 0) {
    if (x == std::floor(x)) return kNan;
    // Reflection: psi(1 - x) - psi(x) = pi / tan(pi x).
    double r = std::remainder(x, 1.0);  // tan has period 1: keeps pi x small
    return digamma(1 - x) - kPi / std::tan(kPi * r);
  }
  double acc = 0;
  while (x < 10) {
    acc -= 1 / x;
    x += 1;
  }
  // psi(x) ~ log x - 1/2x - sum_k B_2k / (2k x^2k)
  double x2 = 1 / (x * x);
  double s =
      x2 * (1.0 / 12 -
            x2 * (1.0 / 120 -
                  x2 * (1.0 / 252 -
                        x2 * (1.0 / 240 - x2 * (1.0 / 132 - x2 * (691.0 / 32760 - x2 / 12))))));
  return acc + std::log(x) - 0.5 / x - s;
}

double polygamma(int64_t n, double x, bool single) {
  if (n == 0) return digamma(x);
  if (std::isnan(x)) return x;
  if (n == 1 && x < 0.5) {
    // Reflection, with sin(pi x) in the result's precision as eager computes it, so that the
    // (meaningless) values at the poles agree too.
    double s2 = 0;
    if (single) {
      float s = std::sin(static_cast<float>(kPi) * static_cast<float>(x));
      s2 = static_cast<double>(s) * s /
           (static_cast<double>(static_cast<float>(kPi)) * static_cast<float>(kPi));
    } else {
      double s = std::sin(kPi * x);
      s2 = s * s / (kPi * kPi);
    }
    return 1.0 / s2 - polygamma(1, 1 - x, single);
  }
  // psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x); the poles give infinities of that sign.
  const bool neg = n % 2 == 0;
  if (x <= 0 && x == std::floor(x)) return neg ? -kInf : kInf;
  if (x < -1e6) return kNan;  // the direct sum would take too long
  double fact = std::tgamma(static_cast<double>(n) + 1);
  double r = fact * hurwitz_zeta(static_cast<double>(n) + 1, x);
  return neg ? -r : r;
}

double eval(ir::Special id, int64_t order, double x, bool single) {
  using S = ir::Special;
  switch (id) {
    case S::Lgamma:
      return std::lgamma(x);
    case S::Digamma:
      return digamma(x);
    case S::Polygamma:
      return polygamma(order, x, single);
    case S::I0:
      return std::isinf(x) ? kInf : scaled_bessel_i(0, std::fabs(x)) * std::exp(std::fabs(x));
    case S::I0e:
      return std::isinf(x) ? 0.0 : scaled_bessel_i(0, std::fabs(x));
    case S::I1:
      if (std::isinf(x)) return x;
      return std::copysign(scaled_bessel_i(1, std::fabs(x)) * std::exp(std::fabs(x)), x);
    case S::I1e:
      return std::isinf(x) ? std::copysign(0.0, x)
                           : std::copysign(scaled_bessel_i(1, std::fabs(x)), x);
    case S::Ndtri:
      return ndtri(x);
    case S::LogNdtr:
      return log_ndtr(x);
    case S::Erfcx:
      return erfcx(x);
    case S::BesselJ0:
      return std::isinf(x) ? 0.0 : std::cyl_bessel_j(0.0, std::fabs(x));
    case S::BesselJ1: {  // odd
      if (std::isinf(x)) return 0.0;
      double r = std::cyl_bessel_j(1.0, std::fabs(x));
      return x < 0 ? -r : r;
    }
    case S::BesselY0:
      return std::isinf(x) && x > 0 ? 0.0 : bessel_y(0, x);
    case S::BesselY1:
      return std::isinf(x) && x > 0 ? 0.0 : bessel_y(1, x);
    case S::ModBesselI0:
      return eval(S::I0, 0, x, single);
    case S::ModBesselI1:
      return eval(S::I1, 0, x, single);
    case S::ModBesselK0:
      return bessel_k(0, x, false);
    case S::ModBesselK1:
      return bessel_k(1, x, false);
    case S::ScaledModBesselK0:
      return bessel_k(0, x, true);
    case S::ScaledModBesselK1:
      return bessel_k(1, x, true);
    case S::SphericalBesselJ0:
      if (std::isinf(x)) return 0.0;
      return x == 0 ? 1.0 : std::sin(x) / x;
    case S::AiryAi:
      return airy_ai(x);
    case S::FrexpMantissa:
    case S::FrexpExponent: {
      if (!std::isfinite(x)) return id == S::FrexpMantissa ? x : 0.0;
      int e = 0;
      const double m = std::frexp(x, &e);
      return id == S::FrexpMantissa ? m : static_cast<double>(e);
    }
    case S::kNum:
      break;
  }
  return kNan;
}

}  // namespace lazyx::special
