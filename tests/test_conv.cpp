// Convolutions: the reference kernel against hand-computed values, an explicit im2col + matmul
// and the adjoint identities of its gradients; the cpu backend (oneDNN) against the reference
// on a grid of 1-, 2- and 3-D problems (groups, dilation, strides, padding, transposed; 16-bit
// floats through float32 primitives); errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "test_util.h"

using namespace lazyx;

namespace {

std::vector<double> values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Values in [-1, 1); integers in [-10, 10).
Tensor make(const Shape& s, Dtype d, uint32_t seed) {
  std::vector<double> v = values(numel(s), seed);
  if (is_floating(d)) return tensor<double>(v, s).to(d);
  std::vector<int64_t> iv(v.size());
  for (size_t i = 0; i < v.size(); ++i) iv[i] = static_cast<int64_t>(std::floor(v[i] * 10));
  return tensor<int64_t>(iv, s).to(d);
}

struct Case {
  std::string name;
  Shape x, w;
  ConvOptions o;
};

ConvOptions opts(std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d,
                 int64_t g = 1, bool t = false, std::vector<int64_t> op = {}) {
  ConvOptions o;
  o.stride = std::move(s);
  o.padding = std::move(p);
  o.dilation = std::move(d);
  o.groups = g;
  o.transposed = t;
  o.output_padding = std::move(op);
  return o;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"1d groups stride pad", {2, 4, 11}, {6, 2, 3}, opts({2}, {1}, {1}, 2)},
      {"1d dilation batch1", {1, 3, 9}, {5, 3, 2}, opts({1}, {0}, {3})},
      {"2d pad", {2, 3, 7, 9}, {4, 3, 3, 3}, opts({1}, {1}, {1})},
      {"2d mixed", {3, 4, 8, 7}, {6, 2, 3, 2}, opts({2, 1}, {1, 0}, {1, 2}, 2)},
      {"2d depthwise", {2, 4, 6, 6}, {4, 1, 3, 3}, opts({1}, {1}, {1}, 4)},
      {"2d 1x1 batch1", {1, 8, 5, 5}, {4, 8, 1, 1}, opts({}, {}, {})},
      {"2d odd stride 3", {2, 2, 10, 11}, {3, 2, 4, 2}, opts({3}, {2, 1}, {1})},
      {"2d parallel", {5, 16, 20, 20}, {16, 16, 3, 3}, opts({1}, {1}, {1})},
      {"3d", {2, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, opts({1, 2, 1}, {1, 0, 1}, {1})},
      {"1d transposed", {2, 4, 5}, {4, 3, 3}, opts({2}, {1}, {1}, 1, true, {1})},
      {"2d transposed groups", {2, 4, 5, 4}, {4, 2, 3, 3}, opts({2}, {1}, {1}, 2, true, {1, 0})},
      {"3d transposed", {1, 2, 3, 3, 2}, {2, 3, 2, 2, 2}, opts({2}, {0}, {1}, 1, true)},
      {"2d transposed dilation", {2, 3, 4, 4}, {3, 2, 3, 3}, opts({1}, {2}, {2}, 1, true)},
      {"2d transposed parallel", {4, 16, 12, 12}, {16, 8, 3, 3}, opts({2}, {1}, {1}, 1, true, {1})},
  };
  return c;
}

double dot(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// |got - want| <= tol * max(1, max |want|) everywhere.
void expect_close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 1;
  for (double v : w) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!(std::fabs(g[i] - w[i]) <= tol * scale)) {
      ADD_FAILURE() << what << " at " << i << ": got " << g[i] << " want " << w[i];
      bad++;
    }
  }
}

TEST(ConvReference, HandComputed1d) {
  set_backend("reference");
  Tensor x = tensor<float>({1, 2, 3, 4}, {1, 1, 4});
  Tensor w = tensor<float>({1, 0, -1}, {1, 1, 3});
  EXPECT_EQ(conv1d(x, w).to_vector<float>(), (std::vector<float>{-2, -2}));
  // Padding 1, stride 2: windows over positions -1..1 and 1..3 (x padded to 0 1 2 3 4 0).
  EXPECT_EQ(conv1d(x, w, tensor<float>({10}, {1}), opts({2}, {1}, {1})).to_vector<float>(),
            (std::vector<float>{8, 8}));
  // Transposed, stride 2: every input scatters the kernel two steps apart.
  Tensor t = convolution(tensor<float>({1, 2}, {1, 1, 2}), w, {}, opts({2}, {0}, {1}, 1, true));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 0, 1, 0, -2}));
  // Integers sum exactly in int64.
  Tensor xi = tensor<int64_t>({1, 2, 3, 4}, {1, 1, 4});
  Tensor wi = tensor<int64_t>({1000000007, 0, -1}, {1, 1, 3});
  EXPECT_EQ(conv1d(xi, wi).to_vector<int64_t>(), (std::vector<int64_t>{1000000004, 2000000010}));
}

// conv2d (no transposition) through an explicit im2col matrix and a matmul, in double.
std::vector<double> im2col_conv2d(const Case& c) {
  const Shape& xs = c.x;
  const Shape& ws = c.w;
  const int64_t G = c.o.groups, icg = xs[1] / G, ocg = ws[0] / G;
  auto at = [](const std::vector<int64_t>& v, int d, int64_t def) {
    return v.empty() ? def : v.size() == 1 ? v[0] : v[d];
  };
  int64_t s[2], p[2], dl[2], out[2];
  for (int d = 0; d < 2; ++d) {
    s[d] = at(c.o.stride, d, 1);
    p[d] = at(c.o.padding, d, 0);
    dl[d] = at(c.o.dilation, d, 1);
    out[d] = (xs[2 + d] + 2 * p[d] - dl[d] * (ws[2 + d] - 1) - 1) / s[d] + 1;
  }
  const std::vector<double> x = values(numel(xs), 1), w = values(numel(ws), 2);
  const int64_t rows = icg * ws[2] * ws[3], cols = out[0] * out[1];
  std::vector<double> y(static_cast<size_t>(xs[0] * ws[0] * cols), 0.0);
  for (int64_t n = 0; n < xs[0]; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      std::vector<double> col(static_cast<size_t>(rows * cols), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t c_in = g * icg + r / (ws[2] * ws[3]);
        const int64_t ky = r / ws[3] % ws[2], kx = r % ws[3];
        for (int64_t q = 0; q < cols; ++q) {
          const int64_t iy = q / out[1] * s[0] - p[0] + ky * dl[0];
          const int64_t ix = q % out[1] * s[1] - p[1] + kx * dl[1];
          if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3]) continue;
          col[r * cols + q] = x[((n * xs[1] + c_in) * xs[2] + iy) * xs[3] + ix];
        }
      }
      for (int64_t o = 0; o < ocg; ++o) {
        const int64_t oc = g * ocg + o;
        for (int64_t q = 0; q < cols; ++q) {
          double acc = 0;
          for (int64_t r = 0; r < rows; ++r) acc += w[oc * rows + r] * col[r * cols + q];
          y[(n * ws[0] + oc) * cols + q] = acc;
        }
      }
    }
  }
  return y;
}

TEST(ConvReference, MatchesIm2colMatmul) {
  set_backend("reference");
  for (const Case& c : cases()) {
    if (c.x.size() != 4 || c.o.transposed) continue;
    Tensor y = convolution(make(c.x, kFloat64, 1), make(c.w, kFloat64, 2), {}, c.o);
    std::vector<double> got = y.to_vector<double>(), want = im2col_conv2d(c);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << c.name;
  }
}

// <conv(x, w), g> = <x, grad_input(g, w)> = <w, grad_weight(g, x)>; and a transposed
// convolution is the adjoint of the plain one with the same weight.
TEST(ConvReference, GradientsAreAdjoints) {
  set_backend("reference");
  for (const Case& c : cases()) {
    Tensor x = make(c.x, kFloat64, 1), w = make(c.w, kFloat64, 2);
    Tensor y = convolution(x, w, {}, c.o);
    Tensor g = make(y.shape(), kFloat64, 3);
    const double lhs = dot(y, g);
    EXPECT_NEAR(dot(x, convolution_backward_input(g, w, c.x, c.o)), lhs, 1e-9) << c.name;
    EXPECT_NEAR(dot(w, convolution_backward_weight(g, x, c.w, c.o)), lhs, 1e-9) << c.name;
    bool op_zero = true;
    for (int64_t v : c.o.output_padding) op_zero = op_zero && v == 0;
    if (c.o.transposed && op_zero) {
      ConvOptions plain = c.o;
      plain.transposed = false;
      Tensor back = convolution(g, w, {}, plain);
      ASSERT_EQ(back.shape(), x.shape()) << c.name;
      EXPECT_NEAR(dot(back, x), lhs, 1e-9) << c.name;
    }
  }
}

TEST(ConvErrors, BadInput) {
  set_backend("reference");
  Tensor x = zeros({1, 3, 5, 5}), w = zeros({4, 3, 3, 3});
  lazyx::testing::expect_error([&] { conv2d(zeros({3, 5, 5}), w); }, {"[conv2d]", "4-D input"});
  lazyx::testing::expect_error([&] { conv2d(x, zeros({4, 2, 3, 3})); }, {"[conv2d]", "channels"});
  lazyx::testing::expect_error(
      [&] {
        conv2d(x, zeros({4, 3, 7, 7}));
      },
      {"[conv2d]", "gives no output"});
  lazyx::testing::expect_error([&] { conv2d(x, w, {}, opts({0}, {}, {})); },
                               {"[conv2d]", "stride"});
  lazyx::testing::expect_error(
      [&] {
        conv2d(x, w, {}, opts({1, 1, 1}, {}, {}));
      },
      {"[conv2d]", "stride has 3 values"});
  lazyx::testing::expect_error([&] { conv2d(x, w, {}, opts({}, {}, {}, 2)); },
                               {"[conv2d]", "groups=2"});
  lazyx::testing::expect_error([&] { conv2d(x, w.to(kFloat64)); }, {"[conv2d]", "same dtype"});
  lazyx::testing::expect_error([&] { conv2d(x.to(kBool), w.to(kBool)); },
                               {"[conv2d]", "dtype bool"});
  lazyx::testing::expect_error([&] { conv2d(x, w, zeros({3})); }, {"[conv2d]", "bias"});
  lazyx::testing::expect_error([&] { conv2d(x, w, {}, opts({2}, {}, {}, 1, false, {1})); },
                               {"[conv2d]", "output_padding"});
  lazyx::testing::expect_error([&] { convolution(x, w, {}, opts({2}, {}, {}, 1, true, {2})); },
                               {"[conv_transpose2d]", "output_padding"});
  lazyx::testing::expect_error(
      [&] {
        convolution_backward_input(zeros({1, 4, 2, 2}), w, x.shape());
      },
      {"[conv2d_backward]", "grad_out"});
}

#ifdef LAZYX_TEST_HAVE_CPU
// Builds the forward, both gradients and the bias gradient on the current backend.
std::vector<Tensor> build(const Case& c, Dtype d) {
  Tensor x = make(c.x, d, 1), w = make(c.w, d, 2);
  Tensor y = convolution(x, w, {}, c.o);
  Tensor b = make({y.shape()[1]}, d, 4);
  Tensor yb = convolution(x, w, b, c.o).relu();
  Tensor g = make(y.shape(), d, 3);
  std::vector<Tensor> r = {y, yb, convolution_backward_input(g, w, c.x, c.o),
                           convolution_backward_weight(g, x, c.w, c.o)};
  sync(r);
  return r;
}

void check_cpu(Dtype d, double tol) {
  const char* names[] = {"forward", "forward+bias+relu", "grad input", "grad weight"};
  for (const Case& c : cases()) {
    set_backend("reference");
    std::vector<Tensor> want = build(c, d);
    set_backend("cpu");
    std::vector<Tensor> got = build(c, d);
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].dtype(), d);
      expect_close(c.name + " " + names[k] + " " + dtype_name(d), got[k], want[k], tol);
    }
  }
}

TEST(ConvCpu, Float32MatchesReference) { check_cpu(kFloat32, 2e-6); }
TEST(ConvCpu, Float64MatchesReference) { check_cpu(kFloat64, 1e-12); }
TEST(ConvCpu, BFloat16MatchesReference) { check_cpu(kBFloat16, 1e-2); }
TEST(ConvCpu, Float16MatchesReference) { check_cpu(kFloat16, 2e-3); }
TEST(ConvCpu, Int64MatchesReference) { check_cpu(kInt64, 0); }

// A step that runs a cached program again reuses its primitives and gives the same values.
TEST(ConvCpu, SecondRunOfCachedProgram) {
  set_backend("cpu");
  const Case& c = cases()[7];
  std::vector<Tensor> first = build(c, kFloat32), second = build(c, kFloat32);
  for (size_t k = 0; k < first.size(); ++k) {
    EXPECT_EQ(first[k].to_vector<float>(), second[k].to_vector<float>());
  }
}
#endif

}  // namespace
