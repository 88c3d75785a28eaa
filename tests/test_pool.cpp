// Pooling, normalization, resampling and padding (lazyx/pool.h) against independent hand loops
// that follow PyTorch's definitions; the cpu backend against the reference backend; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "lazyx/lazyx.h"
#include "test_util.h"

namespace {

using namespace lazyx;
using lazyx::testing::expect_error;
using lazyx::testing::expect_floats;

std::vector<float> randoms(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) % 2001) / 250.0f - 4.0f;
  }
  return v;
}

struct Pool2d {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  bool ceil = false;
};

int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = num / s + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// PyTorch's max_pool2d loop on one [H, W] plane: values and flat indices.
void hand_max_pool(const std::vector<float>& x, int64_t H, int64_t W, const Pool2d& p,
                   std::vector<float>& vals, std::vector<int64_t>& idx) {
  const int64_t OH = out_len(H, p.kh, p.sh, p.ph, p.dh, p.ceil);
  const int64_t OW = out_len(W, p.kw, p.sw, p.pw, p.dw, p.ceil);
  for (int64_t oh = 0; oh < OH; ++oh) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      float best = -std::numeric_limits<float>::infinity();
      int64_t bi = -1;
      for (int64_t i = 0; i < p.kh; ++i) {
        for (int64_t j = 0; j < p.kw; ++j) {
          const int64_t h = oh * p.sh - p.ph + i * p.dh, w = ow * p.sw - p.pw + j * p.dw;
          if (h < 0 || h >= H || w < 0 || w >= W) continue;
          if (bi < 0 || x[h * W + w] > best) {
            best = x[h * W + w];
            bi = h * W + w;
          }
        }
      }
      vals.push_back(best);
      idx.push_back(bi);
    }
  }
}

// PyTorch's avg_pool2d loop on one plane.
std::vector<float> hand_avg_pool(const std::vector<float>& x, int64_t H, int64_t W, const Pool2d& p,
                                 bool include_pad, int64_t divisor) {
  std::vector<float> out;
  const int64_t OH = out_len(H, p.kh, p.sh, p.ph, 1, p.ceil);
  const int64_t OW = out_len(W, p.kw, p.sw, p.pw, 1, p.ceil);
  for (int64_t oh = 0; oh < OH; ++oh) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      int64_t h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
      int64_t h1 = std::min(h0 + p.kh, H + p.ph), w1 = std::min(w0 + p.kw, W + p.pw);
      const int64_t pool = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0);
      w0 = std::max<int64_t>(w0, 0);
      h1 = std::min(h1, H);
      w1 = std::min(w1, W);
      double sum = 0;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) sum += x[h * W + w];
      }
      const int64_t div = divisor > 0 ? divisor : include_pad ? pool : (h1 - h0) * (w1 - w0);
      out.push_back(static_cast<float>(sum / static_cast<double>(div)));
    }
  }
  return out;
}

PoolParams params(const Pool2d& p) {
  return PoolParams{{p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.ceil};
}

const Pool2d kCases[] = {{2, 2, 2, 2, 0, 0},
                         {3, 3, 2, 2, 1, 1},
                         {3, 3, 2, 2, 1, 1, 1, 1, true},
                         {3, 2, 1, 2, 1, 0, 2, 1},
                         {2, 3, 3, 1, 1, 1, 1, 2, true}};

TEST(Pool, MaxPoolMatchesHandLoop) {
  const int64_t B = 3, H = 7, W = 8;
  std::vector<float> xv = randoms(B * H * W, 1);
  for (const Pool2d& p : kCases) {
    std::vector<float> want;
    std::vector<int64_t> want_idx;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> plane(xv.begin() + b * H * W, xv.begin() + (b + 1) * H * W);
      hand_max_pool(plane, H, W, p, want, want_idx);
    }
    auto [v, i] = max_pool(tensor<float>(xv, {1, B, H, W}), params(p));
    expect_floats(v, want, 0);
    EXPECT_EQ(i.to_vector<int64_t>(), want_idx);
    // Backward: each input gets the sum of the gradients of the windows it won.
    Tensor g = ones(v.shape());
    std::vector<float> gi =
        max_pool_backward(g, tensor<float>(xv, {1, B, H, W}), i, 2).to_vector<float>();
    std::vector<float> want_g(xv.size(), 0);
    for (size_t k = 0; k < want_idx.size(); ++k) {
      want_g[(k / (want_idx.size() / B)) * H * W + want_idx[k]] += 1;
    }
    EXPECT_EQ(gi, want_g);
  }
}

TEST(Pool, AvgPoolMatchesHandLoop) {
  const int64_t H = 7, W = 9;
  std::vector<float> xv = randoms(H * W, 2);
  for (const Pool2d& p0 : kCases) {
    Pool2d p = p0;
    p.dh = p.dw = 1;
    for (int variant = 0; variant < 3; ++variant) {
      const bool include_pad = variant != 1;
      const int64_t divisor = variant == 2 ? 5 : 0;
      std::vector<float> want = hand_avg_pool(xv, H, W, p, include_pad, divisor);
      Tensor got = avg_pool(tensor<float>(xv, {1, H, W}), params(p), include_pad,
                            divisor > 0 ? std::optional<int64_t>(divisor) : std::nullopt);
      expect_floats(got, want, 1e-5f);
    }
  }
}

TEST(Pool, AvgPoolBackwardIsTheTransposeOfForward) {
  // <avg_pool(x), g> == <x, avg_pool_backward(g)> for any x and g.
  const Pool2d p{3, 3, 2, 2, 1, 1, 1, 1, true};
  std::vector<float> xv = randoms(2 * 6 * 7, 3);
  Tensor x = tensor<float>(xv, {2, 6, 7});
  Tensor y = avg_pool(x, params(p), false);
  Tensor g = tensor<float>(randoms(y.numel(), 4), y.shape());
  Tensor gx = avg_pool_backward(g, x, params(p), false);
  EXPECT_NEAR(y.mul(g).sum().item<float>(), x.mul(gx).sum().item<float>(), 1e-4);
}

TEST(Pool, AdaptiveAvgPoolAndInterpolateSmallCases) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5}, {1, 1, 5});
  // Windows [0,2), [1,4), [3,5) for 5 -> 3.
  expect_floats(adaptive_avg_pool(x, {3}), {1.5f, 3.0f, 4.5f});
  auto [v, i] = adaptive_max_pool(x, {2});
  expect_floats(v, {3, 5});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 4}));
  // Linear, align_corners=False, 2 -> 4: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25.
  Tensor y = interpolate(tensor<float>({0, 4}, {1, 1, 2}), {4}, InterpMode::Linear, false);
  expect_floats(y, {0, 1, 3, 4});
  Tensor ya = interpolate(tensor<float>({0, 3}, {1, 1, 2}), {4}, InterpMode::Linear, true);
  expect_floats(ya, {0, 1, 2, 3});
  Tensor n = interpolate(tensor<float>({1, 2, 3}, {1, 1, 3}), {5}, InterpMode::Nearest, false);
  expect_floats(n, {1, 1, 2, 2, 3});  // floor(o * 3 / 5)
  Tensor gn = interpolate_backward(ones({1, 1, 5}), {1, 1, 3}, InterpMode::Nearest, false);
  expect_floats(gn, {2, 2, 1});
}

TEST(Pool, PadReflectReplicate) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {1, 4});
  expect_floats(pad(x, {2, 1}, PadMode::Reflect), {3, 2, 1, 2, 3, 4, 3});
  expect_floats(pad(x, {2, 1}, PadMode::Replicate), {1, 1, 1, 2, 3, 4, 4});
  expect_floats(pad_backward(ones({1, 7}), {1, 4}, {2, 1}, PadMode::Replicate), {3, 1, 1, 2});
  expect_floats(pad_backward(ones({1, 7}), {1, 4}, {2, 1}, PadMode::Reflect), {1, 2, 3, 1});
}

TEST(Pool, Im2colCol2im) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  PoolParams p{{2, 2}, {1, 1}, {0, 0}, {1, 1}, false};
  Tensor c = im2col(x, p);
  EXPECT_EQ(c.shape(), (Shape{1, 4, 4}));
  expect_floats(c, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  // col2im of ones counts how many blocks cover each pixel.
  expect_floats(col2im(ones({1, 4, 4}), {3, 3}, p), {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

TEST(Norm, BatchNormTrainUpdatesRunningStatsInPlace) {
  Tensor x = tensor<float>({1, 10, 3, 20, 5, 30, 7, 40}, {4, 2});  // channel 0: 1 3 5 7
  Tensor rm = zeros({2}), rv = ones({2});
  mark_step();
  auto [y, mean, invstd] = batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  expect_floats(mean, {4, 25});
  expect_floats(invstd, {static_cast<float>(1 / std::sqrt(5.0 + 1e-5)),
                         static_cast<float>(1 / std::sqrt(125.0 + 1e-5))});
  expect_floats(rm, {0.4f, 2.5f});
  // Unbiased variance: 20/3 and 500/3.
  expect_floats(rv, {0.9f + 0.1f * 20 / 3, 0.9f + 0.1f * 500 / 3}, 1e-4f);
  auto [ye, m2, s2] = batch_norm(x, Tensor(), Tensor(), rm, rv, false, 0.1, 0);
  EXPECT_EQ(m2.numel(), 0);
  EXPECT_NEAR(ye.to_vector<float>()[0], (1 - 0.4f) / std::sqrt(0.9f + 0.1f * 20 / 3), 1e-5);
  expect_error([&] { batch_norm(x, ones({3}), Tensor(), rm, rv, true, 0.1, 1e-5); },
               {"[batch_norm]", "weight", "channel"});
}

TEST(Norm, BatchNormBackwardMatchesFiniteDifferences) {
  std::vector<float> xv = randoms(24, 5);
  Tensor w = tensor<float>({0.5f, 2.0f}, {2});
  Tensor g = tensor<float>(randoms(24, 6), {3, 2, 4});
  auto loss = [&](const std::vector<float>& v) {
    auto [y, m, s] =
        batch_norm(tensor<float>(v, {3, 2, 4}), w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    return static_cast<double>(y.to(kFloat64).mul(g.to(kFloat64)).sum().item<double>());
  };
  Tensor x = tensor<float>(xv, {3, 2, 4});
  auto [y, m, s] = batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto [dx, dw, db] =
      batch_norm_backward(g, x, w, Tensor(), Tensor(), m, s, true, 1e-5, {true, true, true});
  std::vector<float> dxv = dx.to_vector<float>();
  for (int k : {0, 5, 13, 22}) {
    std::vector<float> a = xv, b = xv;
    a[k] += 1e-2f;
    b[k] -= 1e-2f;
    EXPECT_NEAR(dxv[k], (loss(a) - loss(b)) / 2e-2, 2e-2) << k;
  }
  expect_floats(db, {g.sum({0, 2}).to_vector<float>()[0], g.sum({0, 2}).to_vector<float>()[1]});
}

TEST(Norm, GroupNormMatchesHandLoop) {
  std::vector<float> xv = randoms(2 * 4 * 3, 7);
  auto [y, mean, rstd] = group_norm(tensor<float>(xv, {2, 4, 3}), Tensor(), Tensor(), 2, 1e-5);
  EXPECT_EQ(mean.shape(), (Shape{2, 2}));
  std::vector<float> want;
  for (int g = 0; g < 4; ++g) {  // (sample, group) blocks of 6 contiguous values
    double mu = 0, var = 0;
    for (int i = 0; i < 6; ++i) mu += xv[g * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) var += (xv[g * 6 + i] - mu) * (xv[g * 6 + i] - mu) / 6.0;
    for (int i = 0; i < 6; ++i) {
      want.push_back(static_cast<float>((xv[g * 6 + i] - mu) / std::sqrt(var + 1e-5)));
    }
  }
  expect_floats(y, want, 1e-4f);
}

TEST(Pool, BadInputErrors) {
  Tensor x = zeros({1, 2, 4, 4});
  expect_error(
      [&] {
        max_pool(x, PoolParams{{2, 2}, {2, 2}, {2, 2}, {}, false});
      },
      {"[max_pool]", "padding"});
  expect_error(
      [&] {
        max_pool(zeros({4}), PoolParams{{2, 2}, {}, {}, {}, false});
      },
      {"[max_pool]", "input"});
  expect_error(
      [&] {
        avg_pool(x, PoolParams{{5, 5}, {}, {}, {}, false});
      },
      {"[avg_pool]", "too small"});
  expect_error(
      [&] {
        max_pool(zeros({1, 4, 4}, kInt64), PoolParams{{2, 2}, {}, {}, {}, false});
      },
      {"[max_pool]", "floating"});
  expect_error([&] { pad(zeros({1, 3}), {3, 0}, PadMode::Reflect); }, {"[pad]", "reflection"});
  expect_error(
      [&] {
        group_norm(zeros({2, 6, 3}), Tensor(), Tensor(), 4, 1e-5);
      },
      {"[group_norm]", "groups"});
  expect_error(
      [&] {
        col2im(zeros({1, 5, 4}), {3, 3}, PoolParams{{2, 2}, {1, 1}, {0, 0}, {1, 1}, false});
      },
      {"[col2im]", "kernel"});
}

#ifdef LAZYX_TEST_HAVE_CPU
void compare_backends(const std::function<std::vector<Tensor>()>& build) {
  set_backend("reference");
  std::vector<Tensor> r = build();
  set_backend("cpu");
  std::vector<Tensor> c = build();
  for (size_t k = 0; k < r.size(); ++k) {
    std::vector<double> want = r[k].to_vector<double>(), got = c[k].to_vector<double>();
    ASSERT_EQ(want.size(), got.size()) << k;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i]))) << k << " at " << i;
    }
  }
}

// The cpu backend (fused codegen of the compositions) against the reference backend.
TEST(Pool, CpuBackendMatchesReference) {
  auto build = [] {
    Tensor x = tensor<float>(randoms(2 * 3 * 9 * 8, 9), {2, 3, 9, 8});
    auto [mv, mi] = max_pool(x, PoolParams{{3, 3}, {2, 2}, {1, 1}, {1, 1}, true});
    Tensor a = avg_pool(x, PoolParams{{3, 2}, {2, 1}, {1, 1}, {}, false}, false);
    Tensor ab = avg_pool_backward(a, x, PoolParams{{3, 2}, {2, 1}, {1, 1}, {}, false}, false);
    Tensor up = interpolate(x, {11, 5}, InterpMode::Cubic, false);
    Tensor rp = pad(x, {2, 1, 1, 3}, PadMode::Reflect);
    auto [bn, bm, bs] = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    auto [gx, gw, gb] =
        batch_norm_backward(up.sum({2, 3}, true).expand(x.shape()), x, Tensor(), Tensor(), Tensor(),
                            bm, bs, true, 1e-5, {true, true, true});
    return std::vector<Tensor>{mv, mi, a, ab, up, rp, bn, gx, gw};
  };
  compare_backends(build);
}

// Large enough that the cpu backend splits the tap kernels' rows across its threads.
TEST(Pool, CpuBackendSplitsRowsLikeReference) {
  auto build = [] {
    Tensor x = tensor<float>(randoms(64 * 32 * 32, 10), {8, 8, 32, 32});
    auto [v, i] = max_pool(x, PoolParams{{3, 3}, {1, 1}, {1, 1}, {}, false});
    Tensor back = max_pool_backward(v, x, i, 2);
    Tensor up = interpolate(x, {40, 40}, InterpMode::Linear, false);
    Tensor upb = interpolate_backward(up, x.shape(), InterpMode::Linear, false);
    return std::vector<Tensor>{v, i, back, up, upb};
  };
  compare_backends(build);
}
#endif

}  // namespace

namespace {

TEST(Pool, BadIndicesFailAtRunTimeAndChangeNothing) {
  Tensor x = tensor<float>(randoms(16, 8), {1, 1, 4, 4});
  Tensor g = ones({1, 1, 2, 2});
  Tensor bad = tensor<int64_t>({0, 5, 16, 3}, {1, 1, 2, 2});  // 16 is past the 4x4 plane
  Tensor w = tensor<float>({1, 2}, {2});
  w.add_(1);  // pending, would be donated
  Tensor r = max_pool_backward(g, x, bad, 2);
  expect_error([&] { mark_step(); }, {"[tap_scatter]", "index 16", "nothing was changed"});
  EXPECT_TRUE(w.is_pending());
  r = Tensor();
  mark_step();
  expect_floats(w, {2, 3});
}

}  // namespace
