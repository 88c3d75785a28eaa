// The cpu backend's compiled views, normalizations, reductions, random ops and strided GEMM
// operands against the reference backend: AsStrided reads folded into fused loops (transposes,
// slices, permutes, expands, offsets), Softmax/LogSoftmax/LogSumExp/Argmax fused with their
// producers, reductions over leading, middle and all dims (column loops and reduced-dim splits
// across the pool), counter-based random ops bit-exact with the reference, and matmuls whose
// transposed or sliced operands go to sgemm as strided arguments, with donation (rule 6).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

using Build = std::function<std::vector<Tensor>()>;

double tol_for(Dtype d) {
  switch (d) {
    case kFloat64: return 1e-11;
    case kFloat32: return 2e-5;
    case kFloat16: return 4e-3;
    case kBFloat16: return 3e-2;
    default: return 0;
  }
}

bool close(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// Builds on both backends, syncs all outputs together, compares every output. tol < 0: by dtype.
void check_all(const std::string& what, const Build& build, double tol = -1) {
  set_backend("reference");
  std::vector<Tensor> r = build();
  sync(r);
  std::vector<std::vector<double>> want;
  for (auto& t : r) want.push_back(t.to_vector<double>());
  set_backend("cpu");
  std::vector<Tensor> c = build();
  sync(c);
  ASSERT_EQ(c.size(), r.size()) << what;
  for (size_t k = 0; k < c.size(); ++k) {
    ASSERT_EQ(c[k].shape(), r[k].shape()) << what << " output " << k;
    ASSERT_EQ(c[k].dtype(), r[k].dtype()) << what << " output " << k;
    std::vector<double> got = c[k].to_vector<double>();
    double t = tol >= 0 ? tol : tol_for(c[k].dtype());
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      if (!close(got[i], want[k][i], t)) {
        ADD_FAILURE() << what << " output " << k << " (" << dtype_name(c[k].dtype()) << ") at " << i
                      << ": cpu " << got[i] << " reference " << want[k][i];
        bad++;
      }
    }
  }
}
void check(const std::string& what, const std::function<Tensor()>& f, double tol = -1) {
  check_all(what, [&] { return std::vector<Tensor>{f()}; }, tol);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor make(const Shape& s, Dtype d, uint32_t seed, double lo = -3, double hi = 3, bool specials = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(numel(s));
  for (auto& x : v) x = u(rng);
  if (specials && v.size() > 8) {
    v[1] = NAN;
    v[4] = INFINITY;
    v[7] = -INFINITY;
  }
  if (d == kInt32 || d == kInt64 || d == kBool) {
    std::vector<int64_t> iv(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      double x = std::isfinite(v[i]) ? v[i] : 7.0;
      iv[i] = d == kBool ? (x > 0) : static_cast<int64_t>(std::floor(x * 10));
    }
    return tensor<int64_t>(iv, s).to(d);
  }
  return tensor<double>(v, s).to(d);
}

std::string nm(const std::string& op, Dtype d) { return op + " " + dtype_name(d); }

std::string shape_name(const Shape& s, int64_t dim = -1) {
  std::string r("[");
  for (int64_t x : s) {
    r += std::to_string(x);
    r += ',';
  }
  r += ']';
  if (dim >= 0) {
    r += " dim ";
    r += std::to_string(dim);
  }
  return r;
}

const std::vector<Dtype> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool};
const std::vector<Dtype> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Accumulating epilogues through the GEMM's alpha and beta: each case runs three cached steps on
// both backends, with the learning rate changing between steps, and compares every value. The
// cases the plan must refuse (the GEMM reads the buffer it would accumulate into; a failing op
// runs after it) keep their scratch block for the product.
TEST(CpuCompiled, MatmulEpilogueThroughBeta) {
  struct Case {
    const char* name;
    std::function<Tensor(std::vector<Tensor>&, double)> step;  // returns the updated tensor
    std::vector<Shape> shapes;                                 // [0] is updated in place
    bool fused;  // no scratch for the product on the cpu backend
  };
  Tensor ind = tensor<int64_t>({2, 0, 1}, {3});
  std::vector<Case> cases = {
      {"grad += a.t() @ b",
       [](auto& v, double) { return v[0].add_(v[1].t().matmul(v[2])); },
       {{6, 5}, {9, 6}, {9, 5}},
       true},
      {"w -= lr * (x @ d)",
       [](auto& v, double lr) { return v[0].sub_(v[1].matmul(v[2]), lr); },
       {{7, 4}, {7, 3}, {3, 4}},
       true},
      {"w = x @ d * lr + w",
       [](auto& v, double lr) { return v[0].copy_(v[1].matmul(v[2]) * lr + v[0]); },
       {{7, 4}, {7, 3}, {3, 4}},
       true},
      {"p = a @ b - p",
       [](auto& v, double) { return v[0].copy_(v[1].matmul(v[2]) - v[0]); },
       {{4, 6}, {4, 5}, {5, 6}},
       true},
      {"batched p += A @ B",
       [](auto& v, double) { return v[0].add_(v[1].matmul(v[2])); },
       {{3, 4, 5}, {3, 4, 2}, {3, 2, 5}},
       true},
      {"k = 0: p = a @ b - p",
       [](auto& v, double) { return v[0].copy_(v[1].matmul(v[2]) - v[0]); },
       {{4, 6}, {4, 0}, {0, 6}},
       true},
      {"reads itself: s += s @ b",
       [](auto& v, double) { return v[0].add_(v[0].matmul(v[1])); },
       {{5, 5}, {5, 5}},
       false},
      {"failing op after",
       [ind](auto& v, double) {
         v[0].add_(v[1].matmul(v[2]));
         v[3] = v[0].index_select(0, ind);
         return v[0];
       },
       {{4, 3}, {4, 2}, {2, 3}, {1}},
       false},
  };
  for (const Case& c : cases) {
    std::vector<double> want, got;
    for (const char* be : {"reference", "cpu"}) {
      set_backend(be);
      std::vector<Tensor> v;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        v.push_back(make(c.shapes[i], kFloat32, 120 + static_cast<uint32_t>(i), -1, 1));
      }
      mark_step();
      std::vector<double>& out = std::string(be) == "cpu" ? got : want;
      for (int step = 0; step < 3; ++step) {
        Tensor u = c.step(v, 0.1 * (step + 1));
        mark_step();
        StepReport rep = last_step();
        EXPECT_EQ(rep.num_donated, 1) << c.name << " " << be;
        if (std::string(be) == "cpu") {
          int64_t product = numel(c.shapes[0]) * 4;
          if (c.fused) {
            EXPECT_EQ(rep.scratch_bytes, 0) << c.name;
          } else {
            EXPECT_GE(rep.scratch_bytes, product) << c.name;
          }
        }
        for (double x : u.to_vector<double>()) out.push_back(x);
        for (double x : v.back().to_vector<double>()) out.push_back(x);
      }
    }
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i], want[i], 1e-5))
          << c.name << " " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// Batched matmuls read transposed, sliced and broadcast views in place (sgemm's trans and ld per
// matrix, any batch strides): values match the reference and no operand is copied to scratch.
TEST(CpuCompiled, BatchedMatmulReadsViewsInPlace) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    Shape a, b;
  };
  std::vector<Case> cases = {
      {"q @ k^T (attention scores)",
       [](const Tensor& q, const Tensor& k) { return q.matmul(k.transpose(-2, -1)); },
       {2, 3, 5, 4},
       {2, 3, 6, 4}},
      {"a^T @ b batched",
       [](const Tensor& a, const Tensor& b) { return a.transpose(1, 2).matmul(b); },
       {3, 4, 5},
       {3, 4, 6}},
      {"sliced batch and rows",
       [](const Tensor& a, const Tensor& b) {
         return a.slice(0, 1, 3).slice(2, 1, 4).matmul(b.slice(0, 0, 2));
       },
       {4, 5, 7},
       {3, 3, 2}},
      {"broadcast batch of a view",
       [](const Tensor& a, const Tensor& b) { return a.matmul(b.transpose(-2, -1)); },
       {2, 3, 5, 4},
       {1, 3, 6, 4}},
  };
  for (const Case& c : cases) {
    check(
        c.name,
        [&] { return c.f(make(c.a, kFloat32, 140, -1, 1), make(c.b, kFloat32, 141, -1, 1)); },
        1e-5);
    set_backend("cpu");
    Tensor a = make(c.a, kFloat32, 140, -1, 1), b = make(c.b, kFloat32, 141, -1, 1);
    mark_step();
    Tensor out = c.f(a, b);
    mark_step();
    EXPECT_EQ(last_step().scratch_bytes, 0) << c.name;
  }
}

// Amax/Amin along the contiguous dim run as two vectorized recurrences (the extreme ignoring NaN,
// and a NaN flag): rows with NaN, infinities and signed zeros, a row split across the pool, and
// the column mode, against the reference.
TEST(CpuCompiled, AmaxAminRowsWithSpecials) {
  for (Dtype d : {kFloat32, kFloat64, kFloat16}) {
    for (const Shape& sh : {Shape{4, 33}, Shape{3, 257}, Shape{2, 70000}, Shape{1, 9}}) {
      for (int64_t dim : {1, 0}) {
        std::string what = std::string(dtype_name(d)) + " " + shape_name(sh, dim);
        check("amax " + what, [&] { return make(sh, d, 150, -3, 3, true).amax({dim}); });
        check("amin " + what, [&] { return make(sh, d, 150, -3, 3, true).amin({dim}); });
        check("amax no NaN " + what, [&] { return make(sh, d, 151).amax({dim}); });
        check("amin of fused " + what, [&] { return (make(sh, d, 152) * -2).amin({dim}); });
      }
    }
    check(std::string("amax signed zeros ") + dtype_name(d), [&] {
      return tensor<double>({-0.0, 0.0, -0.0, -0.0, 0.0, -1.0}, {2, 3}).to(d).amax({1});
    });
  }
}

}  // namespace

TEST(CpuCompiled, ViewsFoldIntoFusedLoops) {
  for (Dtype d : kAll) {
    auto two = [d](const Tensor& a) { return d == kBool ? a.logical_not() : a * 2; };
    check(nm("transpose + x", d), [&] { Tensor a = make({13, 13}, d, 1); return two(a.t()).maximum(a); });
    check(nm("transpose odd", d), [&] { return two(make({3, 7}, d, 2).t()); });
    check(nm("permute 3d", d), [&] { return two(make({2, 3, 5}, d, 3).permute({2, 0, 1})); });
    check(nm("strided slice", d), [&] { return two(make({31}, d, 4).slice(0, 3, 30, 4)); });
    check(nm("select offset", d), [&] { return two(make({5, 7}, d, 5).select(0, 3)); });
    check(nm("slice 2d", d), [&] { return two(make({7, 11}, d, 6).slice(1, 2, 9).slice(0, 1, 6, 2)); });
    check(nm("expand view", d), [&] { return two(make({3, 1}, d, 7).expand({3, 5})); });
    check(nm("view broadcast into bigger", d), [&] {
      return make({4, 3, 5}, d, 8).maximum(make({5, 3}, d, 9).t());
    });
    check(nm("size 0 view", d), [&] { return two(make({0, 3}, d, 10).t()); });
    check(nm("size 1 view", d), [&] { return two(make({1, 1}, d, 11).t()); });
    check(nm("view of scalar", d), [&] { return two(make({}, d, 12).expand({4, 3}).t()); });
    check(nm("contiguous of transpose", d), [&] { return make({17, 5}, d, 13).t().contiguous(); });
    check_all(nm("view and base as outputs", d), [&] {
      Tensor a = make({6, 6}, d, 14);
      Tensor v = a.t();
      return std::vector<Tensor>{v.contiguous(), two(v), two(a)};
    });
  }
  // Large enough to split across the pool, with a transposed operand.
  check("large transposed", [] {
    Tensor a = make({301, 257}, kFloat32, 15);
    return (a.t() * 2 + make({257, 301}, kFloat32, 16)).tanh();
  });
}

TEST(CpuCompiled, ReductionsOfViews) {
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
    double t = is_floating(d) ? tol_for(d) * 4 : 0;
    check(nm("sum of transpose", d), [&] { return make({7, 13}, d, 20).t().sum({1}); }, t);
    check(nm("amax of slice", d), [&] { return make({9, 13}, d, 21).slice(1, 1, 12, 2).amax({0}); });
    check(nm("sum of permute middle", d), [&] { return (make({3, 5, 7}, d, 22).permute({1, 0, 2}) * 2).sum({1}); }, t);
  }
}

TEST(CpuCompiled, Normalizations) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{3, 7}, 1}, {{3, 7}, 0}, {{2, 5, 3}, 1}, {{1}, 0}, {{0, 4}, 1}, {{4, 0}, 1}, {{13}, 0},
      {{2, 1, 3}, 1}, {{61, 131}, 1}};
  for (Dtype d : kFloats) {
    for (const auto& [s, dim] : cases) {
      std::string sh = shape_name(s, dim);
      check(nm("softmax " + sh, d), [&, s = s, dim = dim] { return make(s, d, 30, -5, 5, true).softmax(dim); });
      check(nm("log_softmax " + sh, d), [&, s = s, dim = dim] { return (make(s, d, 31) * 3 - 1).log_softmax(dim); });
      check(nm("logsumexp " + sh, d), [&, s = s, dim = dim] { return make(s, d, 32, -5, 5, true).logsumexp({dim}); });
      check(nm("logsumexp keep " + sh, d), [&, s = s, dim = dim] { return (make(s, d, 33) * 20).logsumexp({dim}, true); });
      if (numel(s) > 0) {
        check(nm("argmax " + sh, d), [&, s = s, dim = dim] { return make(s, d, 34, -5, 5, true).argmax(dim); });
        check(nm("argmax fused " + sh, d), [&, s = s, dim = dim] { return (make(s, d, 35) * -1).argmax(dim, true); });
      }
    }
    check(nm("softmax of transpose", d), [&] { return make({7, 5}, d, 36).t().softmax(1); });
    check(nm("softmax all -inf row", d), [&] {
      return tensor<double>({-INFINITY, -INFINITY, 1, 2, NAN, 0}, {3, 2}).to(d).softmax(1);
    });
    check(nm("logsumexp all", d), [&] { return make({5, 7}, d, 37).logsumexp({0, 1}); });
  }
  for (Dtype d : {kInt32, kInt64}) {
    check(nm("argmax int", d), [&] { return make({7, 11}, d, 38).argmax(1); });
    check(nm("argmax int dim0", d), [&] { return make({7, 11}, d, 39).argmax(0); });
  }
  check("argmax flat", [] { return make({7, 11}, kFloat32, 40).argmax(); });
  // Cross-entropy: log_softmax, one-hot pick and mean, with the logits' producer fused.
  check_all("cross entropy", [] {
    Tensor logits = make({64, 10}, kFloat32, 41).matmul(make({10, 10}, kFloat32, 42)) + 0.5;
    Tensor lp = logits.log_softmax(1);
    Tensor onehot = arange(0, 10).eq(tensor<int64_t>(std::vector<int64_t>(64, 3), {64, 1})).to(kFloat32);
    Tensor loss = -(lp * onehot).sum({1}).mean();
    return std::vector<Tensor>{loss, lp.argmax(1), logits.softmax(1)};
  }, 1e-5);
}

TEST(CpuCompiled, ReductionsOverLeadingMiddleAndAllDims) {
  // Column loops (reduced dim outside contiguous kept elements) and reduced-dim splits across
  // the pool (few outputs, long reduced dim), for every op and dtype, with NaN for floats.
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{257, 131}, {0}}, {{5, 300, 7}, {1}}, {{70001}, {0}}, {{300, 301}, {0, 1}}, {{100003, 3}, {0}},
      {{3, 100003}, {1}}, {{2, 65, 67}, {0, 1}}, {{1, 131}, {0}}, {{131, 1}, {0}}, {{0, 5}, {0}}};
  for (Dtype d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
    for (const auto& [s, dims] : cases) {
      std::string sh = shape_name(s);
      bool big = numel(s) > 50000;
      double t = is_floating(d) ? tol_for(d) * (big ? 50 : 4) : 0;
      check(nm("sum " + sh, d), [&, s = s, dims = dims] { return (make(s, d, 50) * 2).sum(dims); }, t);
      if (is_floating(d)) check(nm("mean " + sh, d), [&, s = s, dims = dims] { return make(s, d, 51).mean(dims, true); }, t);
      if (numel(s) > 0) {
        check(nm("amax " + sh, d), [&, s = s, dims = dims] { return make(s, d, 52, -3, 3, true).amax(dims); });
        check(nm("amin " + sh, d), [&, s = s, dims = dims] { return (make(s, d, 53) + 1).amin(dims); });
      }
    }
  }
  check_all("reduction and its prologue as outputs", [] {
    Tensor x = make({513, 129}, kFloat32, 54) * 3;
    return std::vector<Tensor>{x.sum({0}), x, x.amax()};
  }, 1e-4);
  check("int sum wraps", [] {
    return full({100000}, static_cast<double>(int64_t{1} << 62), kInt64).sum();
  });
}

TEST(CpuCompiled, RandomOpsBitExact) {
  for (Dtype d : kFloats) {
    check(nm("rand", d), [&] { manual_seed(5); return rand({1001}, d); }, 0);
    check(nm("rand 2d large", d), [&] { manual_seed(6); return rand({301, 257}, d); }, 0);
    check(nm("randn", d), [&] { manual_seed(7); return randn({100003}, d); }, d == kFloat64 ? 1e-13 : 1e-6);
    check(nm("rand fused", d), [&] { manual_seed(8); return (rand({7, 13}, d) * 2 - 1).relu(); });
  }
  check("randint", [] { manual_seed(9); return randint(-5, 17, {100003}); }, 0);
  check("randint one value", [] { manual_seed(10); return randint(3, 4, {1000}); }, 0);
  check("randint huge range", [] { manual_seed(11); return randint(-(int64_t{1} << 62), int64_t{1} << 62, {999}); }, 0);
  check("randint size 0", [] { manual_seed(12); return randint(0, 10, {0}); }, 0);
  check_all("random in a step with other random ops", [] {
    manual_seed(13);
    Tensor a = rand({64, 65});
    Tensor b = randn({65});
    Tensor c = randint(0, 100, {3});
    return std::vector<Tensor>{a + b, (a * b).sum({1}), c};
  }, 1e-5);
}

TEST(CpuCompiled, MatmulStridedOperands) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {3, 5, 7}, {1, 1, 1}, {17, 31, 13}, {64, 64, 64}, {0, 5, 3}, {4, 0, 3}, {1, 7, 1}, {130, 3, 1}};
  for (const auto& [n, k, m] : shapes) {
    std::string sh = std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(m);
    check("a.t() @ b " + sh, [&, n = n, k = k, m = m] { return make({k, n}, kFloat32, 60).t().matmul(make({k, m}, kFloat32, 61)); }, 1e-5);
    check("a @ b.t() " + sh, [&, n = n, k = k, m = m] { return make({n, k}, kFloat32, 62).matmul(make({m, k}, kFloat32, 63).t()); }, 1e-5);
    check("a.t() @ b.t() " + sh, [&, n = n, k = k, m = m] { return make({k, n}, kFloat32, 64).t().matmul(make({m, k}, kFloat32, 65).t()); }, 1e-5);
    check("sliced rows and cols " + sh, [&, n = n, k = k, m = m] {
      return make({n + 2, k + 3}, kFloat32, 66).slice(0, 1, n + 1).slice(1, 2, k + 2).matmul(
          make({k, m + 4}, kFloat32, 67).slice(1, 3, m + 3));
    }, 1e-5);
  }
  check("transposed view also used elementwise", [] {
    Tensor a = make({9, 5}, kFloat32, 68);
    return a.t().matmul(a) + a.t().sum({1}, true);
  }, 1e-5);
  check("float64 transposed (reference kernel)", [] {
    return make({5, 3}, kFloat64, 69).t().matmul(make({5, 4}, kFloat64, 70));
  }, 1e-12);
  check("batched with transposed operand", [] {
    return make({2, 5, 3}, kFloat32, 71).matmul(make({4, 3}, kFloat32, 72).t());
  }, 1e-5);
}

TEST(CpuCompiled, DonatedWeightReadTransposedBySgemm) {
  // SGD on W while W.t() feeds a matmul of the same step: the GEMM reads W's buffer directly,
  // so the in-place update must wait for it (rule 6), or go through a temporary.
  auto run = [](const char* be) {
    set_backend(be);
    Tensor w = make({6, 4}, kFloat32, 80);
    Tensor x = make({3, 4}, kFloat32, 81);
    mark_step();
    std::vector<double> r;
    for (int step = 0; step < 3; ++step) {
      Tensor y = x.matmul(w.t());                 // 3 x 6, reads W transposed
      Tensor g = y.t().matmul(x);                 // 6 x 4, the "gradient"
      w.sub_(g, 0.01);                            // donated in place
      Tensor z = (w.t() * 2).sum({0});            // reads the new W through a view
      mark_step();
      r.push_back(static_cast<double>(last_step().num_donated));
      for (double v : y.to_vector<double>()) r.push_back(v);
      for (double v : z.to_vector<double>()) r.push_back(v);
    }
    for (double v : w.to_vector<double>()) r.push_back(v);
    return r;
  };
  std::vector<double> want = run("reference");
  std::vector<double> got = run("cpu");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i], 1e-5)) << i << ": " << got[i] << " vs " << want[i];
}

TEST(CpuCompiled, DonatedBufferReadThroughViewsInPlace) {
  auto run = [](const char* be) {
    set_backend(be);
    Tensor w = make({8, 8}, kFloat32, 90);
    Tensor v = make({16}, kFloat32, 91);
    mark_step();
    std::vector<double> r;
    for (int step = 0; step < 2; ++step) {
      w.add_(w.t());                                 // transposed read of the donor
      v.mul_(v.reshape({4, 4}).reshape({16}));       // identity views of the donor
      w.slice(1, 2, 5).mul_(3);                      // in place through a view
      Tensor s = w.softmax(1);                       // multi-pass loop reading the new w
      mark_step();
      r.push_back(static_cast<double>(last_step().num_donated));
      for (double x : s.to_vector<double>()) r.push_back(x);
    }
    for (double x : w.to_vector<double>()) r.push_back(x);
    for (double x : v.to_vector<double>()) r.push_back(x);
    return r;
  };
  std::vector<double> want = run("reference");
  std::vector<double> got = run("cpu");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i], 1e-5)) << i << ": " << got[i] << " vs " << want[i];
}

TEST(CpuCompiled, ScattersFoldIntoFusedLoops) {
  // AsStridedScatter (in-place updates through views) as the strided store of a fused loop,
  // with and without donation, in every dtype; the donation counts must match the reference.
  for (Dtype d : kAll) {
    auto upd = [d](Tensor v) {
      if (d == kBool) v.copy_(v.logical_not()); else v.mul_(3);
    };
    auto run = [&](const char* be) {
      set_backend(be);
      Tensor w = make({7, 9}, d, 100);
      Tensor q = make({5, 5}, d, 101);
      Tensor z = make({0, 4}, d, 102);
      mark_step();
      std::vector<double> r;
      upd(w.slice(1, 2, 7, 2));                     // strided columns, in place (donated)
      upd(q.t().slice(0, 1, 4));                    // transposed rows
      upd(z.slice(1, 1, 3));                        // size 0
      mark_step();
      r.push_back(static_cast<double>(last_step().num_donated));
      Tensor keep = w;                              // not donated: the scatter copies its base
      Tensor w2 = w.clone();
      upd(w2.select(0, 3));
      w2.slice(0, 4, 6).copy_(w2.slice(0, 0, 2));   // source is another view of the same base
      mark_step();
      for (const Tensor& t : {w, q, z, w2, keep}) {
        for (double v : t.to_vector<double>()) r.push_back(v);
      }
      Tensor p = make({11}, d, 103);
      mark_step();
      p.slice(0, 1, 11, 3).copy_(make({4}, d, 104));  // source is a parameter: a loop of its own
      p.slice(0, 0, 2).fill_(1);
      mark_step();
      r.push_back(static_cast<double>(last_step().num_donated));
      for (double v : p.to_vector<double>()) r.push_back(v);
      return r;
    };
    std::vector<double> want = run("reference");
    std::vector<double> got = run("cpu");
    ASSERT_EQ(got.size(), want.size()) << dtype_name(d);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i], want[i], tol_for(d))) << dtype_name(d) << " " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  check("large scatter across the pool", [] {
    Tensor w = make({513, 301}, kFloat32, 105);
    w.slice(1, 1, 300, 2).mul_(make({513, 150}, kFloat32, 106).tanh());
    return w;
  });
  check("scatter into transposed view", [] {
    Tensor w = make({64, 48}, kFloat32, 107);
    w.t().add_(make({48, 64}, kFloat32, 108));
    return w;
  });
}

TEST(CpuCompiled, ScatterMemoryBoundWithDonation) {
  // An in-place update of a slice of a donated 64 MiB parameter allocates nothing.
  set_backend("cpu");
  const int64_t n = (64 << 20) / 4;
  Tensor w = full({n}, 1.0);
  mark_step();
  w.slice(0, 0, n, 2).mul_(2.0);
  mark_step();
  for (int step = 0; step < 5; ++step) {
    w.slice(0, 0, n, 2).mul_(0.5);
    mark_step();
    ASSERT_EQ(last_step().num_donated, 1) << step;
    ASSERT_EQ(last_step().bytes_allocated, 0) << step;
  }
  EXPECT_EQ(w.select(0, 0).item<float>(), 2.0f / 32.0f);
  EXPECT_EQ(w.select(0, 1).item<float>(), 1.0f);
}

TEST(CpuCompiled, MatmulWritesIntoItsReadersStorage) {
  // The GEMM writes into the storage of the value its one elementwise reader stores: the step
  // then needs no scratch block for the matmul's result.
  Tensor x = make({33, 17}, kFloat32, 100), w = make({17, 29}, kFloat32, 101);
  Tensor b = make({29}, kFloat32, 102);
  mark_step();
  check("relu(x @ w + b)", [&] { return (x.matmul(w) + b).relu(); });
  EXPECT_EQ(last_step().scratch_bytes, 0) << "the matmul writes into the output";
  check("log_softmax(x @ w)", [&] { return (x.matmul(w) * 2).log_softmax(1); });  // multi-pass
  check("x @ w + x @ w2", [&] {
    return x.matmul(w) + x.matmul(make({17, 29}, kFloat32, 103)) * 0.5;  // one may forward
  });
  check_all("x @ w read twice", [&] {
    Tensor m = x.matmul(w);
    return std::vector<Tensor>{m.exp(), m.sum({0})};
  });
  check("(x @ w).t() + 1", [&] { return x.matmul(w).t() + 1; });
  check("int64 matmul + 1", [&] {
    return make({5, 7}, kInt64, 104).matmul(make({7, 3}, kInt64, 105)) + 1;
  });
}

TEST(CpuCompiled, MatmulAccumulatesIntoDonatedBuffer) {
  // zero_grad(set_to_none=False) then grad += a.t() @ b: the GEMM writes the donated grad buffer
  // directly. Without the fill it accumulates into it through beta. Neither needs scratch.
  auto run = [](const char* be, bool zero, int64_t* scratch) {
    set_backend(be);
    Tensor a = make({9, 6}, kFloat32, 110), b = make({9, 5}, kFloat32, 111);
    Tensor grad = make({6, 5}, kFloat32, 112);
    mark_step();
    std::vector<double> r;
    for (int step = 0; step < 3; ++step) {
      if (zero) grad.fill_(0);
      grad.add_(a.t().matmul(b));
      Tensor seen = (grad * 2).sum({0});  // read after the update, in the same step
      mark_step();
      StepReport rep = last_step();
      EXPECT_EQ(rep.num_donated, 1) << be;
      *scratch = rep.scratch_bytes;
      for (double v : seen.to_vector<double>()) r.push_back(v);
      a.mul_(0.5);
      mark_step();
    }
    for (double v : grad.to_vector<double>()) r.push_back(v);
    return r;
  };
  for (bool zero : {true, false}) {
    int64_t scratch = 0;
    std::vector<double> want = run("reference", zero, &scratch);
    std::vector<double> got = run("cpu", zero, &scratch);
    EXPECT_EQ(scratch, 0) << zero;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i], want[i], 1e-5)) << zero << " " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}
