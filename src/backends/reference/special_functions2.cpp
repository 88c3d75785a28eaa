// Special functions of two arguments in double (SpecialFn2) and the Airy function: the classical
// orthogonal polynomials by their three-term recurrences (cosine forms for the Chebyshev kinds
// inside (-1, 1) at high degree), the regularized incomplete gamma functions by series,
// continued fraction and Temme's uniform expansion, and Ai by series, Bessel functions and
// asymptotic expansions. Special values follow PyTorch.
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/reference/special_functions.h"

namespace lazyx::special {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-17;

// ---- Orthogonal polynomials ------------------------------------------------------------------

// The degree as PyTorch reads it: truncated to int64. NaN and out-of-range values convert to
// INT64_MIN on x86, so they count as negative (the polynomial is then 0).
int64_t degree(double n) {
  constexpr double k2p63 = 9223372036854775808.0;
  if (!(n >= -k2p63 && n < k2p63)) return -1;
  return static_cast<int64_t>(n);
}

double odd_sign(int64_t n) { return n % 2 == 0 ? 1.0 : -1.0; }

// Above this degree the Chebyshev kinds use their cosine forms inside (-1, 1).
constexpr int64_t kTrigDegree = 8;

enum class Cheb { T, U, V, W };

// The four Chebyshev kinds: p_0 = 1, p_1 = x, 2x, 2x - 1, 2x + 1, then p_{k+1} = 2x p_k - p_{k-1};
// at x = cos t, cos(nt), sin((n+1)t) / sin t, cos((n+1/2)t) / cos(t/2), sin((n+1/2)t) / sin(t/2).
double chebyshev(Cheb kind, double x, int64_t n) {
  if (n < 0) return 0.0;
  const double dn = static_cast<double>(n);
  if (x == 1.0) return kind == Cheb::U ? dn + 1 : (kind == Cheb::W ? 2 * dn + 1 : 1.0);
  if (x == -1.0) {
    double mag = kind == Cheb::U ? dn + 1 : (kind == Cheb::V ? 2 * dn + 1 : 1.0);
    return odd_sign(n) * mag;
  }
  if (n > kTrigDegree && std::fabs(x) < 1) {
    const double t = std::acos(x);
    switch (kind) {
      case Cheb::T:
        return std::cos(dn * t);
      case Cheb::U:
        return std::sin((dn + 1) * t) / std::sin(t);
      case Cheb::V:
        return std::cos((dn + 0.5) * t) / std::cos(t / 2);
      case Cheb::W:
        return std::sin((dn + 0.5) * t) / std::sin(t / 2);
    }
  }
  if (n == 0) return 1.0;
  double p = 1.0, q = x + x;
  if (kind == Cheb::T) q = x;
  if (kind == Cheb::V) q -= 1;
  if (kind == Cheb::W) q += 1;
  for (int64_t k = 2; k <= n; ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
    if (std::isnan(q)) break;  // overflowed to inf - inf: NaN from here on
  }
  return q;
}

// Hermite H (physicists'): H_{k+1} = 2x H_k - 2k H_{k-1}; He (probabilists'): x He_k - k He_{k-1}.
double hermite(bool physicists, double x, int64_t n) {
  if (n < 0) return 0.0;
  const double s = physicists ? 2.0 : 1.0;
  double p = 1.0, q = s * x;
  if (n == 0) return p;
  for (int64_t k = 1; k < n; ++k) {
    const double r = s * x * q - s * static_cast<double>(k) * p;
    p = q;
    q = r;
    if (std::isnan(q)) break;
  }
  return q;
}

// Laguerre L: (k+1) L_{k+1} = (2k+1-x) L_k - k L_{k-1}; L_n(0) = 1.
double laguerre(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (x == 0) return 1.0;
  double p = 1.0, q = 1.0 - x;
  if (n == 0) return p;
  for (int64_t k = 1; k < n; ++k) {
    const double dk = static_cast<double>(k);
    const double r = ((2 * dk + 1 - x) * q - dk * p) / (dk + 1);
    p = q;
    q = r;
    if (std::isnan(q)) break;
  }
  return q;
}

// Legendre P: (k+1) P_{k+1} = (2k+1) x P_k - k P_{k-1}; P_n(1) = 1, P_n(-1) = (-1)^n.
double legendre(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) return x > 0 ? 1.0 : odd_sign(n);
  double p = 1.0, q = x;
  if (n == 0) return p;
  for (int64_t k = 1; k < n; ++k) {
    const double dk = static_cast<double>(k);
    const double r = ((2 * dk + 1) * x * q - dk * p) / (dk + 1);
    p = q;
    q = r;
    if (std::isnan(q)) break;
  }
  return q;
}

// ---- Incomplete gamma ------------------------------------------------------------------------

// log1p(t) - t without cancellation for small t.
double log1pmx(double t) {
  if (std::fabs(t) > 0.1) return std::log1p(t) - t;
  double pw = t * t, sum = 0;
  for (int k = 2; k < 40; ++k) {
    const double term = (k % 2 == 0 ? -pw : pw) / k;
    sum += term;
    if (std::fabs(term) <= kEps * std::fabs(sum)) break;
    pw *= t;
  }
  return sum;
}

// lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2) for a >= 10 (Stirling's series).
double stirling_tail(double a) {
  constexpr double kC[] = {1.0 / 12,   -1.0 / 360,        1.0 / 1260, -1.0 / 1680,
                           1.0 / 1188, -691.0 / 360360.0, 1.0 / 156,  -3617.0 / 122400.0};
  const double r = 1 / (a * a);
  double sum = 0;
  for (int k = 7; k >= 0; --k) sum = sum * r + kC[k];
  return sum / a;
}

// log(x^a e^-x / Gamma(a)), or over Gamma(a + 1) when `plus_one`; for large a in the form
// a (log1p(t) - t) + ..., t = (x - a) / a, which keeps its precision where x is near a.
double log_prefactor(double a, double x, bool plus_one) {
  if (a < 10) return a * std::log(x) - x - std::lgamma(plus_one ? a + 1 : a);
  const double r = a * log1pmx((x - a) / a) + 0.5 * std::log(a / (2 * kPi)) - stirling_tail(a);
  return plus_one ? r - std::log(a) : r;
}

// P(a, x) = x^a e^-x / Gamma(a + 1) * sum_k x^k / ((a+1) ... (a+k)), for x < a + 1.
double igamma_series(double a, double x) {
  double sum = 1, term = 1;
  for (int k = 1; k < 100000; ++k) {
    term *= x / (a + k);
    sum += term;
    if (term <= kEps * sum) break;
  }
  return std::exp(log_prefactor(a, x, true)) * sum;
}

// Q(a, x) = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)) by
// the modified Lentz method, for x >= a + 1.
double igammac_fraction(double a, double x) {
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) <= 3e-16) break;
  }
  return std::exp(log_prefactor(a, x, false)) * h;
}

// Q(a, x) for large a: erfc(eta sqrt(a/2)) / 2 + e^(-a eta^2/2) / sqrt(2 pi a) (c0 + c1 / a),
// with lambda = x / a, eta^2 / 2 = lambda - 1 - log(lambda) (DLMF 8.12).
double igammac_uniform(double a, double x) {
  const double t = (x - a) / a;  // lambda - 1
  const double half_eta2 = -log1pmx(t);
  const double eta = std::copysign(std::sqrt(2 * half_eta2), t);
  double c0, c1;
  if (std::fabs(t) < 1e-4) {  // the removable singularity at lambda = 1: Taylor series in eta
    c0 = -1.0 / 3 + eta / 12 - 2 * eta * eta / 135;
    c1 = -1.0 / 540 - eta / 288;
  } else {
    c0 = 1 / t - 1 / eta;
    c1 = 1 / (eta * eta * eta) - 1 / (t * t * t) - 1 / (t * t) - 1 / (12 * t);
  }
  const double r = std::exp(-a * half_eta2) / std::sqrt(2 * kPi * a) * (c0 + c1 / a);
  return 0.5 * std::erfc(eta * std::sqrt(a / 2)) + r;
}

// The boundary values PyTorch gives (NaN outside a, x >= 0; a = 0 gives P = 1 where x > 0;
// checked in PyTorch's order), or a negative number where the functions must be computed.
double igamma_boundary(double a, double x, bool upper) {
  const double lo = upper ? 1.0 : 0.0, hi = upper ? 0.0 : 1.0;  // at x = 0 and x = inf
  if (x < 0 || a < 0) return kNan;
  if (a == 0) return x > 0 ? hi : kNan;
  if (x == 0) return lo;
  if (std::isinf(a)) return std::isinf(x) ? kNan : lo;  // also for a NaN x, as PyTorch
  if (std::isinf(x)) return hi;
  if (std::isnan(a) || std::isnan(x)) return kNan;
  return -1;
}

// P(a, x) (upper: Q(a, x)); the smaller of the two is computed, the other is its complement.
double incomplete_gamma(double a, double x, bool upper) {
  const double edge = igamma_boundary(a, x, upper);
  if (edge >= 0 || std::isnan(edge)) return edge;
  if (a > 1e6) {
    const double q = igammac_uniform(a, x);
    return upper ? q : 1 - q;
  }
  if (x < a + 1) {
    const double p = igamma_series(a, x);
    return upper ? 1 - p : p;
  }
  const double q = igammac_fraction(a, x);
  return upper ? q : 1 - q;
}

// ---- Airy Ai ---------------------------------------------------------------------------------

constexpr double kAi0 = 0.355028053887817239260;    // Ai(0)
constexpr double kAip0 = -0.258819403792806798405;  // Ai'(0)

// Maclaurin series: Ai = Ai(0) f + Ai'(0) g, f = 1 + x^3/3! + 1*4 x^6/6! + ...,
// g = x + 2 x^4/4! + 2*5 x^7/7! + ... (f'' = x f, g'' = x g).
double airy_series(double x) {
  const double x3 = x * x * x;
  double f = 1, g = x, tf = 1, tg = x;
  for (int k = 1; k < 60; ++k) {
    tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
    tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
    f += tf;
    g += tg;
    if (std::fabs(tf) <= kEps * std::fabs(f) && std::fabs(tg) <= kEps * std::fabs(g)) break;
  }
  return kAi0 * f + kAip0 * g;
}

// u_k of the asymptotic expansions: u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_{k-1}.
double airy_u(int k) {
  double u = 1;
  for (int j = 1; j <= k; ++j)
    u *= (6.0 * j - 5) * (6.0 * j - 3) * (6.0 * j - 1) / ((2.0 * j - 1) * 216 * j);
  return u;
}

// For x >= 9: Ai(x) ~ e^-zeta / (2 sqrt(pi) x^(1/4)) sum_k (-1)^k u_k / zeta^k (DLMF 9.7.5).
double airy_positive_asymptotic(double x) {
  const double zeta = 2.0 / 3 * x * std::sqrt(x);
  double sum = 0, pw = 1, last = kInf;
  for (int k = 0; k < 40; ++k) {
    const double term = (k % 2 == 0 ? 1 : -1) * airy_u(k) * pw;
    if (std::fabs(term) >= last) break;  // the series diverges from its smallest term on
    sum += term;
    last = std::fabs(term);
    if (last <= kEps * std::fabs(sum)) break;
    pw /= zeta;
  }
  return std::exp(-zeta) / (2 * std::sqrt(kPi) * std::sqrt(std::sqrt(x))) * sum;
}

// For x <= -9, y = -x: Ai(-y) ~ (cos(zeta - pi/4) sum_k (-1)^k u_2k / zeta^2k
// + sin(zeta - pi/4) sum_k (-1)^k u_(2k+1) / zeta^(2k+1)) / (sqrt(pi) y^(1/4)) (DLMF 9.7.9).
double airy_negative_asymptotic(double y) {
  const double zeta = 2.0 / 3 * y * std::sqrt(y);
  double even = 0, odd = 0, pw = 1, last = kInf;
  for (int k = 0; k < 40; ++k) {
    const double term = airy_u(k) * pw;
    if (std::fabs(term) >= last) break;
    const double sign = (k / 2) % 2 == 0 ? 1.0 : -1.0;
    (k % 2 == 0 ? even : odd) += sign * term;
    last = std::fabs(term);
    if (last <= kEps) break;
    pw /= zeta;
  }
  const double phase = zeta - kPi / 4;
  return (std::cos(phase) * even + std::sin(phase) * odd) /
         (std::sqrt(kPi) * std::sqrt(std::sqrt(y)));
}

}  // namespace

double airy_ai(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return kNan;  // as PyTorch
  if (x > 104) return 0.0;         // below the smallest subnormal
  if (std::fabs(x) <= 2) return airy_series(x);
  if (x >= 9) return airy_positive_asymptotic(x);
  if (x <= -9) return airy_negative_asymptotic(-x);
  const double zeta = 2.0 / 3 * std::fabs(x) * std::sqrt(std::fabs(x));
  if (x > 0) return std::sqrt(x / 3) / kPi * std::cyl_bessel_k(1.0 / 3, zeta);
  // Ai(-y) = sqrt(y) / 2 (J_1/3(zeta) - Y_1/3(zeta) / sqrt(3)).
  const double y = -x;
  return std::sqrt(y) / 2 *
         (std::cyl_bessel_j(1.0 / 3, zeta) - std::cyl_neumann(1.0 / 3, zeta) / std::sqrt(3.0));
}

// In PyTorch's order of checks: zeta(1, NaN) is inf, zeta(NaN, -1) is inf (a pole).
double zeta(double x, double q) {
  if (x == 1) return kInf;
  if (x < 1) return kNan;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;  // a pole (or q = -inf)
    if (x != std::floor(x)) return kNan;  // negative bases to a fractional power (or NaN)
    if (q < -1e7) return kNan;            // the direct sum would take too long
  }
  if (std::isnan(x) || std::isnan(q)) return kNan;
  const double r = hurwitz_zeta(x, q);
  // Eager's Euler-Maclaurin tail turns a sum that underflowed to 0 into NaN (0 * inf).
  return r == 0 ? kNan : r;
}

double eval2(ir::Special2 id, double x, double y) {
  using S = ir::Special2;
  switch (id) {
    case S::ChebyshevT:
      return chebyshev(Cheb::T, x, degree(y));
    case S::ChebyshevU:
      return chebyshev(Cheb::U, x, degree(y));
    case S::ChebyshevV:
      return chebyshev(Cheb::V, x, degree(y));
    case S::ChebyshevW:
      return chebyshev(Cheb::W, x, degree(y));
    // The shifted kinds are the plain ones at 2x - 1.
    case S::ShiftedChebyshevT:
      return chebyshev(Cheb::T, x + x - 1, degree(y));
    case S::ShiftedChebyshevU:
      return chebyshev(Cheb::U, x + x - 1, degree(y));
    case S::ShiftedChebyshevV:
      return chebyshev(Cheb::V, x + x - 1, degree(y));
    case S::ShiftedChebyshevW:
      return chebyshev(Cheb::W, x + x - 1, degree(y));
    case S::HermiteH:
      return hermite(true, x, degree(y));
    case S::HermiteHe:
      return hermite(false, x, degree(y));
    case S::LaguerreL:
      return laguerre(x, degree(y));
    case S::LegendreP:
      return legendre(x, degree(y));
    case S::Zeta:
      return zeta(x, y);
    case S::Igamma:
      return incomplete_gamma(x, y, false);
    case S::Igammac:
      return incomplete_gamma(x, y, true);
    case S::kNum:
      break;
  }
  return kNan;
}

}  // namespace lazyx::special
