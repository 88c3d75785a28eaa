// The cpu backend's elementwise math against float64, in both math modes: the maximum error in
// ULP (of the float32 result) over a dense sweep of float32 inputs (every kStride-th float of a
// range). Bounds: fast (the default) 4 ULP; precise Sleef's 1 ULP for single calls (1.01: its
// bound is stated as 1.0; tanh measures 1.000 to three places), more for sigmoid and GELU (the
// ops around the call round too). Also: LAZYX_CPU_MATH validation, and no program compiled in
// one mode runs in the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

namespace lazyx {
namespace {

constexpr uint32_t kStride = 1999;  // about a million inputs in [-20, 20]
constexpr double kOne = 1.01;

// Recreates the cpu backend with LAZYX_CPU_MATH=mode ("" unsets it).
void use_mode(const char* mode) {
  if (*mode) {
    setenv("LAZYX_CPU_MATH", mode, 1);
  } else {
    unsetenv("LAZYX_CPU_MATH");
  }
  set_backend("reference");
  set_backend("cpu");
}

// Every kStride-th float32 of [lo, hi] in order of their bit patterns.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> v;
  for (float x = lo; x <= hi;) {
    v.push_back(x);
    uint32_t b;
    std::memcpy(&b, &x, 4);
    if (x < 0 || (x == 0 && std::signbit(x))) {
      b = b - 0x80000000u > kStride ? b - kStride : 0u;  // towards +0
    } else {
      b += kStride;
    }
    std::memcpy(&x, &b, 4);
  }
  return v;
}

// |got - ref| in units of the last place of ref rounded to float32 (subnormal ULP at least).
double ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0.0 : 1e30;
  if (static_cast<double>(got) == ref) return 0.0;
  if (!std::isfinite(got)) return 1e30;
  float r = static_cast<float>(ref);
  if (std::isinf(r)) r = std::copysign(3.40282347e38f, r);
  int e;
  std::frexp(std::fabs(static_cast<double>(r)), &e);
  const double ulp = std::fmax(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

struct Case {
  const char* name;
  float lo, hi;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double fast_bound, precise_bound;
};

std::vector<Case> cases() {
  const double s = 0.70710678118654752440;
  return {
      {"exp", -87, 88, [](const Tensor& x) { return x.exp(); },
       [](double x) { return std::exp(x); }, 4, kOne},
      {"log", 1e-30f, 1e30f, [](const Tensor& x) { return x.log(); },
       [](double x) { return std::log(x); }, 4, kOne},
      {"tanh", -20, 20, [](const Tensor& x) { return x.tanh(); },
       [](double x) { return std::tanh(x); }, 4, kOne},
      {"sigmoid", -20, 20, [](const Tensor& x) { return x.sigmoid(); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 4, 3},
      {"sin", -20, 20, [](const Tensor& x) { return x.sin(); },
       [](double x) { return std::sin(x); }, 4, kOne},
      {"cos", -20, 20, [](const Tensor& x) { return x.cos(); },
       [](double x) { return std::cos(x); }, 4, kOne},
      {"pow(x, 1.7)", 1e-3f, 1e3f, [](const Tensor& x) { return x.pow(1.7); },
       [](double x) { return std::pow(x, static_cast<double>(1.7f)); }, 4, kOne},
      {"pow(x, -2.5)", 1e-3f, 1e3f, [](const Tensor& x) { return x.pow(-2.5); },
       [](double x) { return std::pow(x, -2.5); }, 4, kOne},
      {"pow(x, 3)", -20, 20, [](const Tensor& x) { return x.pow(3.0); },
       [](double x) { return x * x * x; }, 4, kOne},
      // erf enters through GELU (x/2 erfc(-x/sqrt 2)); below -9 its results are subnormal.
      {"gelu", -9, 20, [](const Tensor& x) { return x.gelu(); },
       [s](double x) { return 0.5 * x * std::erfc(-x * s); }, 4, 3.5},
      // The math ops with Sleef calls (lazyx/math.h).
      {"log1p", -0.999f, 1e30f, [](const Tensor& x) { return log1p(x); },
       [](double x) { return std::log1p(x); }, 4, kOne},
      {"expm1", -20, 88, [](const Tensor& x) { return expm1(x); },
       [](double x) { return std::expm1(x); }, 4, kOne},
      {"log2", 1e-30f, 1e30f, [](const Tensor& x) { return log2(x); },
       [](double x) { return std::log2(x); }, 4, kOne},
      {"log10", 1e-30f, 1e30f, [](const Tensor& x) { return log10(x); },
       [](double x) { return std::log10(x); }, 4, kOne},
      {"exp2", -126, 127, [](const Tensor& x) { return exp2(x); },
       [](double x) { return std::exp2(x); }, 4, kOne},
      // erf: 1.09 ULP just above FLT_MIN (2x/sqrt(pi) rounds twice there).
      {"erf", -6, 6, [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); },
       4, 1.1},
      {"tan", -20, 20, [](const Tensor& x) { return tan(x); }, [](double x) { return std::tan(x); },
       4, kOne},
      {"asin", -1, 1, [](const Tensor& x) { return asin(x); },
       [](double x) { return std::asin(x); }, 4, kOne},
      {"acos", -1, 1, [](const Tensor& x) { return acos(x); },
       [](double x) { return std::acos(x); }, 4, kOne},
      {"atan", -1e6f, 1e6f, [](const Tensor& x) { return atan(x); },
       [](double x) { return std::atan(x); }, 4, kOne},
      {"sinh", -88, 88, [](const Tensor& x) { return sinh(x); },
       [](double x) { return std::sinh(x); }, 4, kOne},
      {"cosh", -88, 88, [](const Tensor& x) { return cosh(x); },
       [](double x) { return std::cosh(x); }, 4, kOne},
      {"asinh", -1e6f, 1e6f, [](const Tensor& x) { return asinh(x); },
       [](double x) { return std::asinh(x); }, 4, kOne},
      {"acosh", 1, 1e6f, [](const Tensor& x) { return acosh(x); },
       [](double x) { return std::acosh(x); }, 4, kOne},
      {"atanh", -0.999f, 0.999f, [](const Tensor& x) { return atanh(x); },
       [](double x) { return std::atanh(x); }, 4, kOne},
  };
}

// The maximum ULP error of every case in one mode; prints one line per function.
std::vector<double> measure(const char* mode, const std::vector<std::vector<double>>& refs) {
  use_mode(mode);
  std::vector<double> worst;
  auto cs = cases();
  for (size_t c = 0; c < cs.size(); ++c) {
    std::vector<float> in = sweep(cs[c].lo, cs[c].hi);
    std::vector<float> got =
        cs[c].op(tensor<float>(in, {static_cast<int64_t>(in.size())})).to_vector<float>();
    double w = 0;
    float at = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      double e = ulp_error(got[i], refs[c][i]);
      if (e > w) w = e, at = in[i];
    }
    std::printf("[%s] %-13s [%g, %g] %zu inputs: max %.3f ulp at %.9g\n", *mode ? mode : "default",
                cs[c].name, cs[c].lo, cs[c].hi, in.size(), w, at);
    worst.push_back(w);
  }
  return worst;
}

TEST(CpuMath, MaxUlpErrorAgainstFloat64InBothModes) {
  auto cs = cases();
  std::vector<std::vector<double>> refs;
  for (const Case& c : cs) {
    std::vector<double> r;
    for (float x : sweep(c.lo, c.hi)) r.push_back(c.ref(x));
    refs.push_back(std::move(r));
  }
  std::vector<double> fast = measure("", refs);
  std::vector<double> precise = measure("precise", refs);
  for (size_t c = 0; c < cs.size(); ++c) {
    EXPECT_LE(fast[c], cs[c].fast_bound) << cs[c].name << " in the default (fast) mode";
    EXPECT_LE(precise[c], cs[c].precise_bound) << cs[c].name << " in the precise mode";
  }
  use_mode("");
}

// float64 in the default mode: Sleef's double functions, against long double, in double ULP.
TEST(CpuMath, Float64WithinFourUlpInTheDefaultMode) {
  use_mode("");
  std::vector<double> in;
  for (int i = 0; i <= 200000; ++i) in.push_back(-20.0 + 40.0 * i / 200000.0 + 1e-9 * (i % 7));
  std::vector<double> pos;
  for (double v : in) pos.push_back(std::exp(v));  // [2e-9, 5e8] for log
  struct F64Case {
    const char* name;
    const std::vector<double>& in;
    Tensor (*op)(const Tensor&);
    long double (*ref)(long double);
  };
  const F64Case cs[] = {
      {"exp", in, [](const Tensor& x) { return x.exp(); }, [](long double x) { return expl(x); }},
      {"log", pos, [](const Tensor& x) { return x.log(); }, [](long double x) { return logl(x); }},
      {"tanh", in, [](const Tensor& x) { return x.tanh(); },
       [](long double x) { return tanhl(x); }},
      {"sin", in, [](const Tensor& x) { return x.sin(); }, [](long double x) { return sinl(x); }},
      {"cos", in, [](const Tensor& x) { return x.cos(); }, [](long double x) { return cosl(x); }},
  };
  for (const F64Case& c : cs) {
    std::vector<double> got =
        c.op(tensor<double>(c.in, {static_cast<int64_t>(c.in.size())})).to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < c.in.size(); ++i) {
      const long double r = c.ref(c.in[i]);
      int e;
      std::frexp(static_cast<double>(std::fabs(r)), &e);
      const long double ulp = std::ldexp(1.0L, std::max(e - 53, -1074));
      worst = std::max(worst, static_cast<double>(std::fabs(got[i] - r) / ulp));
    }
    std::printf("[default] float64 %-5s max %.3f ulp\n", c.name, worst);
    EXPECT_LE(worst, 4.0) << c.name << " in float64";
  }
}

TEST(CpuMath, ProgramsOfOneModeDoNotRunInTheOther) {
  // Same graph in both modes: tanh's 3.5-ULP and 1-ULP functions differ on some inputs, so equal
  // results would mean the first mode's program ran again.
  std::vector<float> in = sweep(-3, 3);
  auto run = [&](const char* mode) {
    use_mode(mode);
    Tensor x = tensor<float>(in, {static_cast<int64_t>(in.size())});
    return (x.tanh() * 2).to_vector<float>();
  };
  std::vector<float> fast = run("fast"), precise = run("precise"), again = run("");
  size_t differ = 0;
  for (size_t i = 0; i < in.size(); ++i) differ += fast[i] != precise[i];
  EXPECT_GT(differ, 0u) << "the precise mode reused the fast mode's program";
  EXPECT_EQ(again, fast) << "the default mode is not the fast mode";
}

TEST(CpuMath, InvalidModeRaisesAndKeepsTheBackend) {
  set_backend("reference");
  setenv("LAZYX_CPU_MATH", "sloppy", 1);
  try {
    set_backend("cpu");
    ADD_FAILURE() << "LAZYX_CPU_MATH=sloppy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LAZYX_CPU_MATH='sloppy' is not valid: it accepts fast "
                                         "or precise"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(backend_name(), "reference");
  use_mode("PRECISE");  // any case
  EXPECT_EQ(backend_name(), "cpu");
  use_mode("");
}

}  // namespace
}  // namespace lazyx
