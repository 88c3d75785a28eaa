// Grid sampling, segment reductions, histograms and frexp (lazyx/sampling.h, lazyx/math.h) on
// every backend, against values worked out by hand from PyTorch's definitions, gradients against
// finite differences, and bad offsets failing when the step runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "test_util.h"

using namespace lazyx;
using lazyx::testing::expect_error;
using lazyx::testing::expect_floats;

namespace {

class Sampling : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { set_backend(GetParam()); }
};

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor plane2x2() { return tensor<float>({1, 2, 3, 4}, {1, 1, 2, 2}); }
Tensor point(float x, float y) { return tensor<float>({x, y}, {1, 1, 1, 2}); }

float sample(const Tensor& in, float x, float y, GridMode m, GridPadding p, bool align) {
  return grid_sample(in, point(x, y), m, p, align).to_vector<float>()[0];
}

TEST_P(Sampling, GridSampleBilinearPaddings) {
  const auto B = GridMode::Bilinear;
  // The centre is the mean of the four pixels, with or without align_corners.
  EXPECT_FLOAT_EQ(sample(plane2x2(), 0, 0, B, GridPadding::Zeros, true), 2.5f);
  EXPECT_FLOAT_EQ(sample(plane2x2(), 0, 0, B, GridPadding::Zeros, false), 2.5f);
  // (-1, -1) without align_corners is pixel (-0.5, -0.5): a quarter of pixel 0 with zeros,
  // the pixel itself with border or reflection padding.
  EXPECT_FLOAT_EQ(sample(plane2x2(), -1, -1, B, GridPadding::Zeros, false), 0.25f);
  EXPECT_FLOAT_EQ(sample(plane2x2(), -1, -1, B, GridPadding::Border, false), 1.0f);
  EXPECT_FLOAT_EQ(sample(plane2x2(), -1, -1, B, GridPadding::Reflection, false), 1.0f);
  // x = 1.5 with align_corners on 3 columns is pixel 2.5, reflected to 1.5.
  Tensor row = tensor<float>({0, 1, 2, 0, 1, 2, 0, 1, 2}, {1, 1, 3, 3});
  EXPECT_FLOAT_EQ(sample(row, 1.5f, -1, B, GridPadding::Reflection, true), 1.5f);
  EXPECT_FLOAT_EQ(sample(row, 1.5f, -1, B, GridPadding::Border, true), 2.0f);
  EXPECT_FLOAT_EQ(sample(row, 1.5f, -1, B, GridPadding::Zeros, true), 1.0f);  // half of pixel 2
}

TEST_P(Sampling, GridSampleNearestBicubicAndShapes) {
  // (0.6, -0.6) with align_corners on 2x2 is pixel (0.8, 0.2): nearest (1, 0).
  EXPECT_FLOAT_EQ(sample(plane2x2(), 0.6f, -0.6f, GridMode::Nearest, GridPadding::Zeros, true), 2);
  EXPECT_FLOAT_EQ(sample(plane2x2(), 3, 0.2f, GridMode::Nearest, GridPadding::Zeros, true), 0);
  EXPECT_FLOAT_EQ(sample(plane2x2(), 3, 0.2f, GridMode::Nearest, GridPadding::Border, true), 4);
  // Bicubic at a pixel centre is that pixel; a constant plane stays constant with border.
  std::vector<float> iota(9);
  for (int i = 0; i < 9; ++i) iota[i] = static_cast<float>(i);
  Tensor p3 = tensor<float>(iota, {1, 1, 3, 3});
  EXPECT_FLOAT_EQ(sample(p3, 0, 0, GridMode::Bicubic, GridPadding::Zeros, true), 4);
  Tensor c = full({1, 1, 3, 3}, 5.0f);
  EXPECT_NEAR(sample(c, 0.3f, -0.45f, GridMode::Bicubic, GridPadding::Border, false), 5, 1e-5);
  // Batches, channels and output points keep their places.
  Tensor in = tensor<float>({1, 2, 3, 4, 10, 20, 30, 40, 5, 6, 7, 8, 50, 60, 70, 80}, {2, 2, 2, 2});
  Tensor g = tensor<float>({-1, -1, 1, 1, 1, -1, -1, 1}, {2, 1, 2, 2});
  Tensor r = grid_sample(in, g, GridMode::Nearest, GridPadding::Zeros, true);
  EXPECT_EQ(r.shape(), (Shape{2, 2, 1, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 4, 10, 40, 6, 7, 60, 70}));
}

TEST_P(Sampling, GridSampleGradients) {
  Tensor ones = full({1, 1, 1, 1}, 1.0f);
  const auto B = GridMode::Bilinear;
  // At the centre each pixel gets a quarter; the grid gradient is the slope times (size-1)/2.
  expect_floats(
      grid_sample_backward_input(ones, plane2x2(), point(0, 0), B, GridPadding::Zeros, true),
      {0.25f, 0.25f, 0.25f, 0.25f});
  expect_floats(
      grid_sample_backward_grid(ones, plane2x2(), point(0, 0), B, GridPadding::Zeros, true),
      {0.5f, 1.0f});
  // Clamped by border padding: no gradient for the grid.
  expect_floats(
      grid_sample_backward_grid(ones, plane2x2(), point(-2, 0), B, GridPadding::Border, true),
      {0.0f, 1.0f});
  expect_floats(grid_sample_backward_input(ones, plane2x2(), point(0.6f, -0.6f), GridMode::Nearest,
                                           GridPadding::Zeros, true),
                {0, 1, 0, 0});
}

// The grid gradient against central differences of the forward, in float64.
TEST_P(Sampling, GridGradientMatchesFiniteDifferences) {
  std::vector<double> pix(16), pts = {0.31, -0.42, -0.93, 0.77, 1.21, 0.05};
  for (int i = 0; i < 16; ++i) pix[i] = std::sin(0.7 * i) * 3;
  Tensor in = tensor<double>(pix, {1, 1, 4, 4});
  for (GridMode m : {GridMode::Bilinear, GridMode::Bicubic}) {
    for (GridPadding p : {GridPadding::Zeros, GridPadding::Reflection}) {
      Tensor g = tensor<double>(pts, {1, 1, 3, 2});
      Tensor ones = full({1, 1, 1, 3}, 1.0, kFloat64);
      std::vector<double> got =
          grid_sample_backward_grid(ones, in, g, m, p, false).to_vector<double>();
      for (size_t k = 0; k < pts.size(); ++k) {
        std::vector<double> hi = pts, lo = pts;
        hi[k] += 1e-6;
        lo[k] -= 1e-6;
        auto f = [&](const std::vector<double>& q) {
          return grid_sample(in, tensor<double>(q, {1, 1, 3, 2}), m, p, false)
              .sum()
              .to_vector<double>()[0];
        };
        EXPECT_NEAR(got[k], (f(hi) - f(lo)) / 2e-6, 1e-5) << "coordinate " << k;
      }
    }
  }
}

Tensor offsets(const std::vector<int64_t>& v, const Shape& s) { return tensor<int64_t>(v, s); }

TEST_P(Sampling, SegmentReduceKindsAndInitial) {
  Tensor x = tensor<float>({0, 1, 2, 3, 4, 5}, {6});
  Tensor off = offsets({0, 2, 2, 6}, {4});  // lengths 2, 0, 4
  expect_floats(segment_reduce(x, off, SegmentKind::Sum, 0), {1, 0, 14});
  std::vector<float> mean = segment_reduce(x, off, SegmentKind::Mean, 0).to_vector<float>();
  EXPECT_FLOAT_EQ(mean[0], 0.5f);
  EXPECT_TRUE(std::isnan(mean[1]));
  EXPECT_FLOAT_EQ(mean[2], 3.5f);
  EXPECT_EQ(segment_reduce(x, off, SegmentKind::Max, 0).to_vector<float>(),
            (std::vector<float>{1, -kInf, 5}));
  EXPECT_EQ(segment_reduce(x, off, SegmentKind::Min, 0).to_vector<float>(),
            (std::vector<float>{0, kInf, 2}));
  expect_floats(segment_reduce(x, off, SegmentKind::Prod, 0), {0, 1, 120});
  expect_floats(segment_reduce(x, off, SegmentKind::Sum, 0, 2.0), {3, 2, 16});
  expect_floats(segment_reduce(x, off, SegmentKind::Mean, 0, 2.0), {1.5f, 2, 4});
  expect_floats(segment_reduce(x, off, SegmentKind::Max, 0, 2.0), {2, 2, 5});
  // Along axis 1, one row of lengths per row of data; trailing dims reduce independently.
  Tensor y = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_floats(segment_reduce(y, offsets({0, 1, 3, 0, 3, 3}, {2, 3}), SegmentKind::Sum, 1),
                {1, 5, 15, 0});
  Tensor z = tensor<float>({1, 10, 2, 20, 3, 30}, {3, 2});
  expect_floats(segment_reduce(z, offsets({0, 1, 3}, {3}), SegmentKind::Max, 0), {1, 10, 3, 30});
}

TEST_P(Sampling, SegmentReduceGradients) {
  Tensor x = tensor<float>({1, 3, 3, -2, -2}, {5});
  Tensor off = offsets({0, 3, 5}, {3});
  Tensor g = tensor<float>({1, -1}, {2});
  auto grad = [&](const Tensor& data, SegmentKind k, std::optional<double> init) {
    Tensor y = segment_reduce(data, off, k, 0, init);
    return segment_reduce_backward(g, y, data, off, k, 0, init);
  };
  // Ties share a positive gradient; a negative one goes whole to each (as eager).
  expect_floats(grad(x, SegmentKind::Max, 2.0), {0, 0.5f, 0.5f, 0, 0});
  expect_floats(grad(x, SegmentKind::Min, std::nullopt), {1, 0, 0, -1, -1});
  expect_floats(grad(x, SegmentKind::Mean, std::nullopt),
                {1 / 3.0f, 1 / 3.0f, 1 / 3.0f, -0.5f, -0.5f});
  expect_floats(grad(x, SegmentKind::Prod, 2.0), {18, 6, 6, 4, 4});
  // Zeros get the product of the others (times the initial value).
  Tensor zs = tensor<float>({0, 3, 0, 2, 0}, {5});
  expect_floats(grad(zs, SegmentKind::Prod, 2.0), {0, 0, 0, 0, -4});
}

TEST_P(Sampling, SegmentReduceBadOffsetsFailWhenRun) {
  Tensor x = tensor<float>({0, 1, 2, 3}, {4});
  expect_error(
      [&] {
        segment_reduce(x, offsets({0, 1, 3}, {3}), SegmentKind::Sum, 0).to_vector<float>();
      },
      {"[segment_reduce]", "sum to 3", "unsafe=True"});
  expect_floats(
      segment_reduce(x, offsets({0, 1, 3}, {3}), SegmentKind::Sum, 0, std::nullopt, false), {0, 3});
  expect_error(
      [&] {
        segment_reduce(x, offsets({0, 3, 2}, {3}), SegmentKind::Sum, 0, std::nullopt, false)
            .to_vector<float>();
      },
      {"[segment_reduce]", "negative length"});
  expect_error(
      [&] {
        segment_reduce(x, offsets({0, 5}, {2}), SegmentKind::Sum, 0, std::nullopt, false)
            .to_vector<float>();
      },
      {"[segment_reduce]", "beyond"});
  expect_error(
      [&] {
        segment_reduce(x, offsets({0, 4}, {1, 2}), SegmentKind::Sum, 0);
      },
      {"[segment_reduce]", "do not match"});
}

TEST_P(Sampling, Histogram) {
  Tensor x = tensor<float>({1, 2, 1, 4}, {4});
  Tensor w = tensor<float>({1, 2, 3, 4}, {4});
  Tensor edges = tensor<float>({0, 2, 4}, {3});
  expect_floats(histogram(x, edges, Tensor()).first, {2, 2});
  expect_floats(histogram(x, edges, w).first, {4, 6});
  expect_floats(histogram(x, edges, Tensor(), true).first, {0.25f, 0.25f});
  // Unsorted edges: eager's binary search; here every element lies outside [3, 2].
  expect_floats(histogram(x, tensor<float>({3, 1, 2}, {3}), Tensor()).first, {0, 0});
  auto [h, e] = histogram(x, 3, std::nullopt, Tensor());
  expect_floats(h, {2, 1, 1});
  expect_floats(e, {1, 2, 3, 4});
  auto [h2, e2] = histogram(tensor<float>({5, 5}, {2}), 2, std::nullopt, Tensor());
  expect_floats(h2, {0, 2});  // [4.5, 5.5] split at 5: both in the upper bin
  expect_floats(e2, {4.5f, 5, 5.5f});
  expect_floats(histogram(x, 2, std::make_pair(0.0, 2.0), Tensor()).first, {0, 3});
  // An empty input bins [0, 1], as eager.
  expect_floats(histogram(zeros({3, 0}), 2, std::nullopt, Tensor()).second, {0, 0.5f, 1});
}

TEST_P(Sampling, Frexp) {
  const float tiny = std::ldexp(0.75f, -140);  // subnormal
  Tensor x = tensor<float>({0, -0.75f, 3, kInf, std::nanf(""), tiny}, {6});
  auto [m, e] = frexp(x);
  EXPECT_EQ(e.dtype(), kInt32);
  std::vector<float> mv = m.to_vector<float>();
  EXPECT_EQ(mv[0], 0);
  EXPECT_EQ(mv[1], -0.75f);
  EXPECT_EQ(mv[2], 0.75f);
  EXPECT_EQ(mv[3], kInf);
  EXPECT_TRUE(std::isnan(mv[4]));
  EXPECT_EQ(mv[5], 0.75f);
  EXPECT_EQ(e.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 2, 0, 0, -140}));
  auto [md, ed] = frexp(tensor<double>({1e300, -3e-310}, {2}));
  EXPECT_EQ(ed.to_vector<int64_t>(), (std::vector<int64_t>{997, -1028}));
  EXPECT_NEAR(md.to_vector<double>()[0], 1e300 / std::ldexp(1.0, 997), 1e-15);
  expect_error([&] { frexp(tensor<int64_t>({1}, {1})); }, {"[frexp]", "floating point"});
}

INSTANTIATE_TEST_SUITE_P(Backends, Sampling, ::testing::ValuesIn(backend_names()));

}  // namespace
