// The cpu backend against the reference backend, in the style of ggml's test-backend-ops: every
// op, in every dtype it supports, on odd shapes (size 0, size 1, primes, non-contiguous views,
// broadcasts). Each case builds the same lazy computation twice, once per backend, and compares
// the values within a tolerance that depends on the dtype:
//   float64 1e-12 relative, float32 2e-6 (1e-5 for transcendental ops), float16 2e-3,
//   bfloat16 1.6e-2; integers and bool exactly. NaN matches NaN, infinities match by sign.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

using Build = std::function<Tensor()>;

double tol_for(Dtype d, bool transcendental) {
  switch (d) {
    case kFloat64: return 1e-12;
    case kFloat32: return transcendental ? 1e-5 : 2e-6;
    case kFloat16: return 2e-3;
    case kBFloat16: return 1.6e-2;
    default: return 0;
  }
}

bool close(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// Runs `build` on both backends and compares. `tol` < 0 picks the dtype's tolerance.
void check(const std::string& what, const Build& build, bool transcendental = false,
           double tol = -1) {
  set_backend("reference");
  Tensor r = build();
  std::vector<double> want = r.to_vector<double>();
  Shape shape = r.shape();
  Dtype dt = r.dtype();
  set_backend("cpu");
  Tensor c = build();
  std::vector<double> got = c.to_vector<double>();
  ASSERT_EQ(c.shape(), shape) << what;
  ASSERT_EQ(c.dtype(), dt) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  double t = tol >= 0 ? tol : tol_for(dt, transcendental);
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    if (!close(got[i], want[i], t)) {
      ADD_FAILURE() << what << " (" << dtype_name(dt) << ") at " << i << ": cpu " << got[i]
                    << " reference " << want[i];
      bad++;
    }
  }
}

// Like check, for several results of one computation built and synced together, so they
// compile into one program (ops over the same operands fuse into one loop). names[k] names
// result k in failures.
void check_many(const std::vector<std::string>& names, const std::function<std::vector<Tensor>()>& build) {
  set_backend("reference");
  std::vector<Tensor> r = build();
  sync(r);
  set_backend("cpu");
  std::vector<Tensor> c = build();
  sync(c);
  ASSERT_EQ(r.size(), names.size());
  ASSERT_EQ(c.size(), names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string& what = names[k];
    std::vector<double> want = r[k].to_vector<double>(), got = c[k].to_vector<double>();
    ASSERT_EQ(c[k].shape(), r[k].shape()) << what;
    ASSERT_EQ(c[k].dtype(), r[k].dtype()) << what;
    ASSERT_EQ(got.size(), want.size()) << what;
    double t = tol_for(r[k].dtype(), false);
    int bad = 0;
    for (size_t i = 0; i < want.size() && bad < 5; ++i) {
      if (!close(got[i], want[i], t)) {
        ADD_FAILURE() << what << " (" << dtype_name(r[k].dtype()) << ") at " << i << ": cpu " << got[i]
                      << " reference " << want[i];
        bad++;
      }
    }
  }
}

// Deterministic host values in [lo, hi), with a few special values mixed in.
std::vector<double> values(int64_t n, uint32_t seed, double lo = -3, double hi = 3,
                           bool specials = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = u(rng);
  if (specials && n > 6) {
    v[0] = 0.0;
    v[1] = -0.0;
    v[2] = NAN;
    v[3] = INFINITY;
    v[4] = -INFINITY;
    v[5] = 1.0;
  }
  return v;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A tensor of dtype d holding `values` (converted), created on the current backend.
Tensor make(const Shape& s, Dtype d, uint32_t seed, double lo = -3, double hi = 3,
            bool specials = false) {
  std::vector<double> v = values(numel(s), seed, lo, hi, specials);
  if (is_integral(d) || d == kBool) {
    std::vector<int64_t> iv(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      double x = std::isfinite(v[i]) ? v[i] : 7.0;
      iv[i] = d == kBool ? (x > 0) : static_cast<int64_t>(std::floor(x * 10));
    }
    return tensor<int64_t>(iv, s).to(d);
  }
  return tensor<double>(v, s).to(d);
}

const std::vector<Shape> kShapes = {{0}, {1}, {7}, {3, 5}, {2, 3, 7}, {1, 13, 1}, {131}, {}};
const std::vector<Dtype> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<Dtype> kInts = {kInt32, kInt64, kUInt8, kInt8, kInt16};

std::string name(const std::string& op, const Shape& s, Dtype d) {
  std::string r = op + " [";
  for (int64_t x : s) r += std::to_string(x) + ",";
  return r + "] " + dtype_name(d);
}

}  // namespace

TEST(CpuOps, BackendIsRegistered) {
  auto names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  set_backend("cpu");
  EXPECT_EQ(backend_name(), "cpu");
}

TEST(CpuOps, UnaryFloat) {
  using U = std::function<Tensor(const Tensor&)>;
  const std::vector<std::tuple<std::string, U, bool, double, double>> ops = {
      {"neg", [](const Tensor& x) { return x.neg(); }, false, -3, 3},
      {"abs", [](const Tensor& x) { return x.abs(); }, false, -3, 3},
      {"exp", [](const Tensor& x) { return x.exp(); }, true, -10, 10},
      {"log", [](const Tensor& x) { return x.log(); }, true, -1, 20},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, false, -1, 20},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, false, -1, 20},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, true, -5, 5},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, true, -20, 20},
      {"relu", [](const Tensor& x) { return x.relu(); }, false, -3, 3},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, true, -5, 5},
      {"gelu_tanh", [](const Tensor& x) { return x.gelu(true); }, true, -5, 5},
      {"sin", [](const Tensor& x) { return x.sin(); }, true, -10, 10},
      {"cos", [](const Tensor& x) { return x.cos(); }, true, -10, 10},
      {"logical_not", [](const Tensor& x) { return x.logical_not(); }, false, -1, 1},
  };
  for (const auto& [op, f, tr, lo, hi] : ops) {
    for (Dtype d : kFloats) {
      for (const Shape& s : kShapes) {
        check(name(op, s, d), [&, f = f, lo = lo, hi = hi] { return f(make(s, d, 1, lo, hi, true)); }, tr);
      }
      // Non-contiguous: a transposed and a strided slice.
      check(name(op + " transposed", {5, 3}, d),
            [&, f = f, lo = lo, hi = hi] { return f(make({3, 5}, d, 2, lo, hi).t()); }, tr);
      check(name(op + " sliced", {11}, d),
            [&, f = f, lo = lo, hi = hi] { return f(make({23}, d, 3, lo, hi).slice(0, 1, 23, 2)); }, tr);
    }
  }
}

TEST(CpuOps, UnaryInteger) {
  for (Dtype d : {kInt32, kInt64, kBool}) {
    for (const Shape& s : kShapes) {
      if (d != kBool) {
        check(name("neg", s, d), [&] { return make(s, d, 4).neg(); });
        check(name("abs", s, d), [&] { return make(s, d, 4).abs(); });
        check(name("relu", s, d), [&] { return make(s, d, 4).relu(); });
      }
      check(name("logical_not", s, d), [&] { return make(s, d, 4).logical_not(); });
      check(name("exp of int", s, d), [&] { return make(s, d, 4).exp(); }, true);
    }
  }
}

TEST(CpuOps, BinaryAllDtypes) {
  using B = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, B>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return a.add(b, 3); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"sub_alpha", [](const Tensor& a, const Tensor& b) { return a.sub(b, 2); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return a.le(b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); }},
      {"logical_and", [](const Tensor& a, const Tensor& b) { return a.logical_and(b); }},
      {"logical_or", [](const Tensor& a, const Tensor& b) { return a.logical_or(b); }},
  };
  // Shape pairs: equal, broadcast both ways, size 0 and 1, scalar.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{7}, {7}}, {{3, 1}, {1, 5}}, {{5}, {3, 5}}, {{2, 3, 7}, {3, 1}}, {{0}, {1}}, {{1}, {1}},
      {{4, 0}, {4, 1}}, {{}, {13}}, {{131}, {}}};
  std::vector<Dtype> dts = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool};
  // Every op of one dtype and shape pair in one program: the same operands, so the ops fuse into
  // one loop (one compile instead of sixteen); each result is still compared on its own.
  for (Dtype d : dts) {
    auto ops_for = [&](const Shape& s) {
      std::vector<std::string> names;
      std::vector<B> fs;
      for (const auto& [op, f] : ops) {
        if (d == kBool && (op == "sub" || op == "sub_alpha" || op == "div")) continue;
        names.push_back(name(op, s, d));
        fs.push_back(f);
      }
      return std::make_pair(names, fs);
    };
    for (const auto& [sa, sb] : shapes) {
      auto [names, fs] = ops_for(sa);
      check_many(names, [&, fs = fs] {
        Tensor a = make(sa, d, 5, -3, 3, true), b = make(sb, d, 6);
        std::vector<Tensor> r;
        for (const B& f : fs) r.push_back(f(a, b));
        return r;
      });
    }
    auto [names, fs] = ops_for({5, 3});
    for (auto& n : names) n += " transposed";
    check_many(names, [&, fs = fs] {
      Tensor a = make({3, 5}, d, 7).t(), b = make({5, 3}, d, 8);
      std::vector<Tensor> r;
      for (const B& f : fs) r.push_back(f(a, b));
      return r;
    });
  }
  // Mixed dtypes promote.
  for (Dtype a : dts) {
    for (Dtype b : dts) {
      std::string ab = std::string(dtype_name(a)) + " " + dtype_name(b);
      check_many({"add mixed " + ab, "lt mixed " + ab}, [&] {
        Tensor x = make({3, 7}, a, 9), y = make({7}, b, 10);
        return std::vector<Tensor>{x + y, x.lt(y)};
      });
    }
  }  // The narrow integers: every op, and promotion among them (uint8 with int8 is int16).
  for (Dtype a : {kUInt8, kInt8, kInt16}) {
    auto names = std::vector<std::string>{};
    std::vector<B> fs;
    for (const auto& [op, f] : ops) {
      names.push_back(name(op, {3, 7}, a));
      fs.push_back(f);
    }
    check_many(names, [&, fs = fs] {
      Tensor x = make({3, 7}, a, 5, -3, 3, true), y = make({7}, a, 6);
      std::vector<Tensor> r;
      for (const B& f : fs) r.push_back(f(x, y));
      return r;
    });
    for (Dtype b : {kUInt8, kInt8, kInt16, kInt64, kFloat32, kBool}) {
      std::string ab = std::string(dtype_name(a)) + " " + dtype_name(b);
      check_many({"add mixed " + ab, "mul mixed " + ab}, [&] {
        Tensor x = make({3, 7}, a, 9), y = make({7}, b, 10);
        return std::vector<Tensor>{x + y, x * y};
      });
    }
  }
}

TEST(CpuOps, PowAndHostScalars) {
  for (Dtype d : kFloats) {
    check(name("pow", {3, 7}, d), [&] { return make({3, 7}, d, 11, 0, 3).pow(make({7}, d, 12, -2, 2)); }, true);
    check(name("pow scalar", {13}, d), [&] { return make({13}, d, 11, -2, 3).pow(2.5); }, true);
    check(name("scalar ops", {13}, d), [&] { return (make({13}, d, 13) * 2.5 + 1) / 3 - 0.25; });
  }
  for (Dtype d : kInts) {
    check(name("pow int", {13}, d), [&] { return make({13}, d, 14, 0, 1).pow(make({13}, d, 15, 0, 0.4)); });
    check(name("int scalar ops", {13}, d), [&] { return (make({13}, d, 16) * 3 + 7) - 2; });
    check(name("clamp", {13}, d), [&] { return make({13}, d, 16).clamp(-5, 9); });
  }
}

TEST(CpuOps, WhereAndCasts) {
  std::vector<Dtype> dts = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool,
                            kUInt8,   kInt8,    kInt16};
  for (Dtype d : dts) {
    check(name("where", {3, 7}, d), [&] {
      return where(make({3, 1}, kBool, 17), make({3, 7}, d, 18), make({7}, d, 19));
    });
    check(name("where float cond", {7}, d), [&] {
      return where(make({7}, kFloat32, 20, -1, 1, true).gt(0), make({7}, d, 18), make({7}, d, 19));
    });
    for (Dtype to : dts) {
      check(std::string("cast ") + dtype_name(d) + " -> " + dtype_name(to),
            [&] { return make({131}, d, 21, -1e3, 1e3, true).to(to); });
    }
  }
  check("cast huge float to int", [] {
    return tensor<double>({1e30, -1e30, NAN, 3.7, -3.7, 2147483648.0}, {6}).to(kInt64);
  });
  check("cast huge float to int32", [] {
    return tensor<double>({1e30, -1e30, NAN, 3.7, -3.7, 2147483648.0}, {6}).to(kInt32);
  });
  for (Dtype to : {kUInt8, kInt8, kInt16}) {  // through int32, wrapping, as eager on x86
    check(std::string("cast huge float to ") + dtype_name(to), [to] {
      return tensor<double>({1e30, NAN, 300.7, -3.7, -200.0, 70000.0}, {6}).to(to);
    });
  }
}

TEST(CpuOps, Creation) {
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool}) {
    check(name("full", {3, 7}, d), [&] { return full({3, 7}, 2.5, d); });
    check(name("zeros", {0}, d), [&] { return zeros({0}, d); });
  }
  check("arange int", [] { return arange(3, 50, 4); });
  check("arange float", [] { return arange(0.5, 10.0, 0.75); });
  check("arange float64", [] { return arange(0.5, 10.0, 0.3, kFloat64); });
  check("arange plus", [] { return arange(0.0, 13.0, 1.0) * 2 + 1; });
  for (Dtype d : kFloats) {
    check(name("rand", {1000}, d), [&] { manual_seed(7); return rand({1000}, d); });
    check(name("randn", {1000}, d), [&] { manual_seed(8); return randn({1000}, d); });
  }
  check("randint", [] { manual_seed(9); return randint(-5, 17, {1000}); });
  check("rand fused", [] { manual_seed(10); return rand({257}) * 2 - 1; });
}

TEST(CpuOps, Reductions) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{7}, {}}, {{3, 5}, {0}}, {{3, 5}, {1}}, {{2, 3, 7}, {0, 2}}, {{2, 3, 7}, {1}}, {{0, 3}, {0}},
      {{1}, {0}}, {{13, 1}, {}}};
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
    for (const auto& [s, dims] : cases) {
      for (bool keep : {false, true}) {
        check(name("sum", s, d), [&] { return make(s, d, 22).sum(dims, keep); }, false,
              is_floating(d) ? tol_for(d, true) * 4 : 0);
        if (is_floating(d)) {
          check(name("mean", s, d), [&] { return make(s, d, 22).mean(dims, keep); }, true);
        }
        if (numel(s) > 0) {
          check(name("amax", s, d), [&] { return make(s, d, 23).amax(dims, keep); });
          check(name("amin", s, d), [&] { return make(s, d, 23).amin(dims, keep); });
        }
        if (is_floating(d)) {
          check(name("logsumexp", s, d), [&] { return make(s, d, 24).logsumexp(dims, keep); }, true);
        }
      }
      if (numel(s) > 0 && s.size() >= 1) {
        check(name("argmax", s, d), [&] { return make(s, d, 25).argmax(0); });
      }
    }
    check(name("sum of fused", {3, 7}, d), [&] { return (make({3, 7}, d, 26) * 2 + 1).sum({1}); }, false,
          is_floating(d) ? tol_for(d, true) * 4 : 0);
  }
  for (Dtype d : kFloats) {
    check(name("softmax", {3, 7}, d), [&] { return make({3, 7}, d, 27).softmax(1); }, true);
    check(name("softmax dim0", {3, 7}, d), [&] { return make({3, 7}, d, 27).softmax(0); }, true);
    check(name("log_softmax", {3, 7}, d), [&] { return make({3, 7}, d, 27).log_softmax(1); }, true);
  }
}

// Row sums add into 16 partial sums in a fixed order: every length around and past the lane
// count, a row split across the pool, and rows of special values.
TEST(CpuOps, RowSumsOfEveryLength) {
  for (Dtype d : {kFloat32, kFloat64, kBFloat16}) {
    for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 40, 1000, 4099, 200003}) {
      const Shape s = {n > 4099 ? 1 : 3, n};
      check(
          name("row sum", s, d), [&] { return (make(s, d, 31) * 3 - 1).sum({1}); }, false,
          tol_for(d, true) * 4);
      check(
          name("row mean", s, d), [&] { return make(s, d, 32).mean({1}); }, true);
    }
  }
  const double inf = INFINITY;
  const std::vector<std::vector<double>> rows = {
      std::vector<double>(37, -0.0),
      {1, inf, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8},
      {1, inf, 2, -inf, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8},
      {1, 2, NAN, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8}};
  for (const auto& row : rows) {
    check("sum of special values", [&] {
      return tensor(row, {1, static_cast<int64_t>(row.size())}).sum({1});
    });
  }
  set_backend("cpu");
  Tensor z = full({2, 40}, -0.0f).sum({1});  // a sum starts from +0, as eager's
  EXPECT_FALSE(std::signbit(z.to_vector<float>()[0]));
}

TEST(CpuOps, Matmul) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 5}, {5, 7}}, {{1, 1}, {1, 1}}, {{2, 3, 5}, {5, 4}}, {{2, 1, 3, 5}, {3, 5, 2}},
      {{0, 5}, {5, 3}}, {{4, 0}, {0, 3}}, {{17, 31}, {31, 13}}, {{64, 64}, {64, 64}}};
  // 16-bit matmuls run as float32 sgemm with one rounding at the end: within an ulp of the
  // reference, which accumulates in double.
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    const double tol = d == kFloat32 ? 1e-5 : tol_for(d, false);
    for (const auto& [sa, sb] : cases) {
      check(
          name("matmul", sa, d), [&] { return make(sa, d, 28).matmul(make(sb, d, 29)); }, false,
          tol);
    }
    check(
        name("matmul transposed", {5, 3}, d),
        [&] {
          return make({3, 5}, d, 30).t().matmul(make({3, 6}, d, 31));
        },
        false, tol);
  }
  check("addmm", [] { return addmm(make({7}, kFloat32, 32), make({3, 5}, kFloat32, 33), make({5, 7}, kFloat32, 34), 0.5, 2); },
        false, 1e-5);
}

TEST(CpuOps, ViewsAndIndexing) {
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kInt32, kInt64, kBool}) {
    check(name("permute", {2, 3, 7}, d), [&] { return make({2, 3, 7}, d, 35).permute({2, 0, 1}) * 1; });
    check(name("expand", {3, 7}, d), [&] { return make({3, 1}, d, 36).expand({3, 7}).contiguous(); });
    check(name("select+slice", {7}, d), [&] { return make({3, 7}, d, 37).select(0, 1).slice(0, 1, 6, 2).contiguous(); });
    check(name("cat", {5, 7}, d), [&] { return cat({make({2, 7}, d, 38), make({3, 7}, d, 39)}, 0); });
    check(name("cat dim1", {3, 9}, d), [&] { return cat({make({3, 2}, d, 38), make({3, 7}, d, 39)}, 1); });
    check(name("stack", {2, 7}, d), [&] { return stack({make({7}, d, 38), make({7}, d, 39)}, 0); });
    Tensor idx;
    check(name("index_select", {3, 4}, d),
          [&] { return make({3, 7}, d, 40).index_select(1, tensor<int64_t>({6, 0, 3, 3})); });
    check(name("gather", {3, 2}, d), [&] {
      return make({3, 7}, d, 41).gather(1, tensor<int64_t>({0, 6, 1, 1, 5, 2}, {3, 2}));
    });
    check(name("scatter", {3, 7}, d), [&] {
      return make({3, 7}, d, 42).scatter(1, tensor<int64_t>({0, 6, 1, 2, 5, 3}, {3, 2}), make({3, 2}, d, 43));
    });
    if (d != kBool) {
      check(name("scatter_add", {3, 7}, d), [&] {
        return make({3, 7}, d, 42).scatter_add(1, tensor<int64_t>({0, 0, 1, 1, 5, 5}, {3, 2}), make({3, 2}, d, 43));
      });
    }
    check(name("index_copy", {3, 7}, d), [&] {
      return make({3, 7}, d, 44).index_copy(0, tensor<int64_t>({2, 0}), make({2, 7}, d, 45));
    });
    check(name("index_put", {3, 7}, d), [&] {
      Tensor t = make({3, 7}, d, 46);
      t.index_put_({tensor<int64_t>({0, 2}), tensor<int64_t>({-1, 3})}, make({2}, d, 47), d != kBool);
      return t;
    });
    check(name("masked_fill", {3, 7}, d),
          [&] { return make({3, 7}, d, 48).masked_fill(make({7}, kBool, 49), 1); });
    check(name("slice assign", {3, 7}, d), [&] {
      Tensor t = make({3, 7}, d, 50);
      t.slice(1, 2, 5).copy_(make({3, 3}, d, 51));
      return t;
    });
    check(name("inplace on view", {3, 7}, d), [&] {
      Tensor t = make({3, 7}, d, 52);
      if (d == kBool) t.select(0, 1).fill_(true); else t.select(0, 1).mul_(3);
      return t;
    });
  }
}

TEST(CpuOps, IndexErrorRaisesAndKeepsState) {
  // An index known only at run time: the failing op runs before the donated buffer of w is
  // written, so the failed step changes nothing.
  set_backend("cpu");
  Tensor w = tensor<float>({1, 2, 3, 4}, {4});
  Tensor i = tensor<int64_t>({0, 1}, {2});
  mark_step();
  w.add_(1.0);
  Tensor bad = w.index_select(0, i + 8);
  EXPECT_THROW(mark_step(), Error);
  bad = Tensor();
  std::vector<float> v = w.to_vector<float>();
  EXPECT_EQ(v, (std::vector<float>{2, 3, 4, 5}));
  w.add_(1.0);
  Tensor ok = w.index_select(0, i + 2);
  mark_step();
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{3, 4, 5, 6}));
}
