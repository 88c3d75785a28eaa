// View ops: shapes, strides and storage offsets as PyTorch computes them, and the aliasing
// contract: a view shares its base, so in-place writes through a view update the base and reads
// of a view show every update to the base (or to another view of it), across steps.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lazyx/lazyx.h"
#include "ops_test_util.h"

namespace {

using namespace lazyx_ops_test;

// Checks shape, strides and storage offset together.
void ExpectLayout(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.strides(), strides);
  EXPECT_EQ(t.storage_offset(), offset);
}

// x[i][j] = 4 i + j, shape [3,4], contiguous.
Tensor X() { return Iota(12, {3, 4}); }

// ---------------------------------------------------------------------------------------------
// Layout of each view op

TEST(Views, View) {
  Tensor x = X();
  ExpectLayout(x, {3, 4}, {4, 1}, 0);
  EXPECT_FALSE(x.is_view());
  EXPECT_TRUE(x.is_contiguous());

  Tensor v = x.view({4, 3});
  ExpectLayout(v, {4, 3}, {3, 1}, 0);
  EXPECT_TRUE(v.is_view());
  EXPECT_TRUE(v.is_contiguous());
  ExpectFloats(v, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  ExpectLayout(x.view({2, -1}), {2, 6}, {6, 1}, 0);
  ExpectLayout(x.view({12}), {12}, {1}, 0);
  ExpectLayout(x.view({2, 2, 3}), {2, 2, 3}, {6, 3, 1}, 0);
  ExpectLayout(x.view({1, 12, 1}).view({3, 4}), {3, 4}, {4, 1}, 0);
  EXPECT_EQ(x.view({-1}).numel(), 12);
}

TEST(Views, ViewOfWrongSizeRaises) {
  Tensor x = X();
  EXPECT_THROW(x.view({5}), lazyx::Error);
  EXPECT_THROW(x.view({-1, -1}), lazyx::Error);
  EXPECT_THROW(x.view({5, -1}), lazyx::Error);
  EXPECT_THROW(x.reshape({7}), lazyx::Error);
}

TEST(Views, ViewSplitsADimOfANonContiguousTensor) {
  // x.t() is [4,3] with strides [1,4]; splitting its dim 0 (stride 1) into [2,2] is a valid
  // view with strides [2,1,4]. v[p][q][r] = x[r][2p + q] = 4 r + 2 p + q.
  Tensor x = X();
  Tensor v = x.t().view({2, 2, 3});
  ExpectLayout(v, {2, 2, 3}, {2, 1, 4}, 0);
  EXPECT_TRUE(v.is_view());
  ExpectFloats(v, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  x.add_(1);
  ExpectFloats(v, {1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12});
}

TEST(Views, ReshapeOfContiguousTensorIsAView) {
  Tensor x = X();
  Tensor r = x.reshape({6, 2});
  ExpectLayout(r, {6, 2}, {2, 1}, 0);
  EXPECT_TRUE(r.is_view());
  ExpectLayout(x.reshape({-1}), {12}, {1}, 0);
  x.add_(1);
  ExpectFloats(r, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  lazyx::mark_step();
  ExpectFloats(r, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST(Views, ReshapeOfNonContiguousTensorCopies) {
  Tensor x = X();
  Tensor xt = x.t();
  Tensor r = xt.reshape({12});
  EXPECT_EQ(r.shape(), (Shape{12}));
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_FALSE(r.is_view());
  ExpectFloats(r, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // A copy: later updates of the base do not reach it, and writes to it do not reach the base.
  x.add_(100);
  r.mul_(-1);
  ExpectFloats(r, {0, -4, -8, -1, -5, -9, -2, -6, -10, -3, -7, -11});
  lazyx::mark_step();
  ExpectFloats(r, {0, -4, -8, -1, -5, -9, -2, -6, -10, -3, -7, -11});
  ExpectFloats(x, {100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111});
}

TEST(Views, ViewOfIncompatibleNonContiguousTensorRaises) {
  Tensor x = X();
  // torch: "view size is not compatible with input tensor's size and stride ... Use .reshape".
  EXPECT_THROW(x.t().view({12}), lazyx::Error);
  EXPECT_THROW(x.narrow(1, 0, 2).view({6}), lazyx::Error);  // offsets 0,1,4,5,8,9
  EXPECT_THROW(x.t().view({3, 4}), lazyx::Error);
  // reshape of the same tensors works (as a copy).
  ExpectFloats(x.narrow(1, 0, 2).reshape({6}), {0, 1, 4, 5, 8, 9});
  ExpectFloats(x.t().reshape({3, 4}), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST(Views, ViewMergesUniformlyStridedDims) {
  // Columns 0 and 2 of x sit at offsets 0,2,4,...,10: one stride-2 dim, so view() works.
  Tensor x = X();
  Tensor v = x.slice(1, 0, 4, 2).view({6});
  ExpectLayout(v, {6}, {2}, 0);
  EXPECT_TRUE(v.is_view());
  ExpectFloats(v, {0, 2, 4, 6, 8, 10});
  v.add_(1);
  ExpectFloats(x, {1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11});
  lazyx::mark_step();
  ExpectFloats(v, {1, 3, 5, 7, 9, 11});
}

TEST(Views, Expand) {
  Tensor c = lazyx::tensor<float>({1, 2, 3}, {3, 1});
  Tensor e = c.expand({3, 4});
  ExpectLayout(e, {3, 4}, {1, 0}, 0);
  EXPECT_TRUE(e.is_view());
  EXPECT_FALSE(e.is_contiguous());
  ExpectFloats(e, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  ExpectLayout(c.expand({-1, 2}), {3, 2}, {1, 0}, 0);
  // New leading dims get stride 0.
  Tensor x = X();
  Tensor e2 = x.expand({2, 3, 4});
  ExpectLayout(e2, {2, 3, 4}, {0, 4, 1}, 0);
  ExpectFloats(e2.select(0, 1), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_FLOAT_EQ(e2.sum().item<float>(), 132);
  // The view follows its base.
  c.add_(10);
  ExpectFloats(e, {11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13});
  lazyx::mark_step();
  ExpectFloats(e, {11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13});
}

TEST(Views, ExpandOfNonSingletonDimRaises) {
  Tensor c = lazyx::tensor<float>({1, 2, 3}, {3, 1});
  EXPECT_THROW(c.expand({2, 4}), lazyx::Error);
  EXPECT_THROW(c.expand({4}), lazyx::Error);  // fewer dims than the tensor
}

TEST(Views, Permute) {
  // y[i][j][k] = 12 i + 4 j + k; permute({2,0,1}) gives p[k][i][j], strides [1,12,4].
  Tensor y = Iota(24, {2, 3, 4});
  Tensor p = y.permute({2, 0, 1});
  ExpectLayout(p, {4, 2, 3}, {1, 12, 4}, 0);
  EXPECT_TRUE(p.is_view());
  EXPECT_FALSE(p.is_contiguous());
  ExpectFloats(
      p, {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23});
  ExpectLayout(y.permute({-1, 0, -2}), {4, 2, 3}, {1, 12, 4}, 0);
  ExpectLayout(y.permute({0, 1, 2}), {2, 3, 4}, {12, 4, 1}, 0);
  ExpectLayout(y.permute({1, 2, 0}), {3, 4, 2}, {4, 1, 12}, 0);
  EXPECT_THROW(y.permute({0, 0, 1}), lazyx::Error);
  EXPECT_THROW(y.permute({0, 1}), lazyx::Error);
}

TEST(Views, TransposeAndT) {
  Tensor x = X();
  Tensor t = x.transpose(0, 1);
  ExpectLayout(t, {4, 3}, {1, 4}, 0);
  EXPECT_TRUE(t.is_view());
  EXPECT_FALSE(t.is_contiguous());
  ExpectFloats(t, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  ExpectLayout(x.t(), {4, 3}, {1, 4}, 0);
  ExpectLayout(x.transpose(-1, 0), {4, 3}, {1, 4}, 0);
  ExpectFloats(x.t(), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST(Views, Squeeze) {
  // z is [1,3,1,2] with strides [6,2,2,1].
  Tensor z = Iota(6, {1, 3, 1, 2});
  ExpectLayout(z.squeeze(), {3, 2}, {2, 1}, 0);
  ExpectLayout(z.squeeze(0), {3, 1, 2}, {2, 2, 1}, 0);
  ExpectLayout(z.squeeze(2), {1, 3, 2}, {6, 2, 1}, 0);
  ExpectLayout(z.squeeze(-2), {1, 3, 2}, {6, 2, 1}, 0);
  // Squeezing a dim whose size is not 1 leaves the shape alone.
  ExpectLayout(z.squeeze(1), {1, 3, 1, 2}, {6, 2, 2, 1}, 0);
  EXPECT_TRUE(z.squeeze().is_view());
  ExpectFloats(z.squeeze(), {0, 1, 2, 3, 4, 5});
  EXPECT_THROW(z.squeeze(4), lazyx::Error);
  // Squeeze of a one-element tensor gives a 0-d tensor.
  Tensor one = lazyx::tensor<float>({7}, {1, 1});
  EXPECT_EQ(one.squeeze().shape(), (Shape{}));
  EXPECT_FLOAT_EQ(one.squeeze().item<float>(), 7);
}

TEST(Views, Unsqueeze) {
  Tensor x = X();
  // The new dim's stride is size[dim] * stride[dim] (1 at the end), as in PyTorch.
  ExpectLayout(x.unsqueeze(0), {1, 3, 4}, {12, 4, 1}, 0);
  ExpectLayout(x.unsqueeze(1), {3, 1, 4}, {4, 4, 1}, 0);
  ExpectLayout(x.unsqueeze(2), {3, 4, 1}, {4, 1, 1}, 0);
  ExpectLayout(x.unsqueeze(-1), {3, 4, 1}, {4, 1, 1}, 0);
  ExpectLayout(x.unsqueeze(-3), {1, 3, 4}, {12, 4, 1}, 0);
  ExpectLayout(x.t().unsqueeze(1), {4, 1, 3}, {1, 12, 4}, 0);
  ExpectLayout(x.t().unsqueeze(2), {4, 3, 1}, {1, 4, 1}, 0);
  EXPECT_TRUE(x.unsqueeze(0).is_view());
  ExpectFloats(x.unsqueeze(1), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_THROW(x.unsqueeze(3), lazyx::Error);
  EXPECT_THROW(x.unsqueeze(-4), lazyx::Error);
  // Of a 0-d tensor.
  Tensor s = lazyx::tensor<float>({5}, {});
  ExpectLayout(s.unsqueeze(0), {1}, {1}, 0);
}

TEST(Views, Select) {
  Tensor x = X();
  Tensor row = x.select(0, 1);
  ExpectLayout(row, {4}, {1}, 4);
  EXPECT_TRUE(row.is_view());
  ExpectFloats(row, {4, 5, 6, 7});
  Tensor col = x.select(1, 2);
  ExpectLayout(col, {3}, {4}, 2);
  EXPECT_FALSE(col.is_contiguous());
  ExpectFloats(col, {2, 6, 10});
  Tensor last = x.select(-1, -1);
  ExpectLayout(last, {3}, {4}, 3);
  ExpectFloats(last, {3, 7, 11});
  ExpectLayout(x.select(0, -3), {4}, {1}, 0);
  // Selecting from 1-D gives 0-d.
  Tensor e = row.select(0, 2);
  ExpectLayout(e, {}, {}, 6);
  EXPECT_FLOAT_EQ(e.item<float>(), 6);
  EXPECT_THROW(x.select(0, 3), lazyx::Error);
  EXPECT_THROW(x.select(0, -4), lazyx::Error);
  EXPECT_THROW(x.select(2, 0), lazyx::Error);
}

TEST(Views, Slice) {
  Tensor x = X();
  Tensor even = x.slice(1, 0, 4, 2);
  ExpectLayout(even, {3, 2}, {4, 2}, 0);
  EXPECT_TRUE(even.is_view());
  ExpectFloats(even, {0, 2, 4, 6, 8, 10});
  Tensor odd = x.slice(1, 1, std::nullopt, 2);
  ExpectLayout(odd, {3, 2}, {4, 2}, 1);
  ExpectFloats(odd, {1, 3, 5, 7, 9, 11});
  Tensor rows = x.slice(0, 1);
  ExpectLayout(rows, {2, 4}, {4, 1}, 4);
  EXPECT_TRUE(rows.is_contiguous());
  ExpectFloats(rows, {4, 5, 6, 7, 8, 9, 10, 11});
  // Negative bounds count from the end: columns 1 and 2.
  Tensor mid = x.slice(1, -3, -1);
  ExpectLayout(mid, {3, 2}, {4, 1}, 1);
  ExpectFloats(mid, {1, 2, 5, 6, 9, 10});
  // Bounds past the end clamp; an empty range gives a size-0 dim.
  ExpectLayout(x.slice(0, 1, 100), {2, 4}, {4, 1}, 4);
  EXPECT_EQ(x.slice(0, 2, 1).shape(), (Shape{0, 4}));
  EXPECT_EQ(x.slice(0, 2, 1).numel(), 0);
  // Step 3 over 4 columns: 0 and 3.
  Tensor s3 = x.slice(1, 0, 4, 3);
  ExpectLayout(s3, {3, 2}, {4, 3}, 0);
  ExpectFloats(s3, {0, 3, 4, 7, 8, 11});
  ExpectLayout(x.slice(0, std::nullopt, std::nullopt, 2), {2, 4}, {8, 1}, 0);
  EXPECT_THROW(x.slice(1, 0, 4, 0), lazyx::Error);
}

TEST(Views, Narrow) {
  Tensor x = X();
  Tensor n = x.narrow(1, 1, 2);
  ExpectLayout(n, {3, 2}, {4, 1}, 1);
  EXPECT_TRUE(n.is_view());
  ExpectFloats(n, {1, 2, 5, 6, 9, 10});
  ExpectLayout(x.narrow(0, 2, 1), {1, 4}, {4, 1}, 8);
  ExpectFloats(x.narrow(0, 2, 1), {8, 9, 10, 11});
  ExpectLayout(x.narrow(-1, 3, 1), {3, 1}, {4, 1}, 3);
  EXPECT_THROW(x.narrow(1, 3, 2), lazyx::Error);
  EXPECT_THROW(x.narrow(0, 0, 4), lazyx::Error);
}

TEST(Views, Flatten) {
  Tensor y = Iota(24, {2, 3, 4});
  Tensor f = y.flatten();
  ExpectLayout(f, {24}, {1}, 0);
  EXPECT_TRUE(f.is_view());
  ExpectLayout(y.flatten(1), {2, 12}, {12, 1}, 0);
  ExpectLayout(y.flatten(0, 1), {6, 4}, {4, 1}, 0);
  ExpectLayout(y.flatten(-2, -1), {2, 12}, {12, 1}, 0);
  ExpectLayout(y.flatten(1, 1), {2, 3, 4}, {12, 4, 1}, 0);
  // Flatten of a non-contiguous tensor copies.
  Tensor ft = X().t().flatten();
  EXPECT_EQ(ft.shape(), (Shape{12}));
  ExpectFloats(ft, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // Flatten of a 0-d tensor gives [1].
  EXPECT_EQ(lazyx::tensor<float>({5}, {}).flatten().shape(), (Shape{1}));
}

TEST(Views, ChainedViewsAccumulateOffsets) {
  Tensor x = X();
  Tensor v = x.slice(0, 1, 3).select(1, 2);
  ExpectLayout(v, {2}, {4}, 6);
  ExpectFloats(v, {6, 10});
  // permute -> select -> slice: p[k][i][j] = 12 i + 4 j + k, k = 3, j in {1, 2}.
  Tensor y = Iota(24, {2, 3, 4});
  Tensor w = y.permute({2, 0, 1}).select(0, 3).slice(1, 1, 3);
  ExpectLayout(w, {2, 2}, {12, 4}, 7);
  ExpectFloats(w, {7, 11, 19, 23});
  // view of a view of a view: x.view(2,6)[1] starts at 6, narrow(0,2,3) at 8.
  Tensor n = x.view({2, 6}).select(0, 1).narrow(0, 2, 3);
  ExpectLayout(n, {3}, {1}, 8);
  ExpectFloats(n, {8, 9, 10});
}

TEST(Views, ViewsKeepDtype) {
  Tensor i = lazyx::tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = i.t().select(0, 2);
  EXPECT_DTYPE(v, kInt64);
  EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{3, 6}));
  Tensor b = lazyx::tensor<bool>({true, false, false, true}, {2, 2});
  Tensor d = b.t().reshape({4});
  EXPECT_DTYPE(d, kBool);
  EXPECT_EQ(d.to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(b.slice(1, 1, 2).to_vector<bool>(), (std::vector<bool>{false, true}));
}

// ---------------------------------------------------------------------------------------------
// In-place writes through views

TEST(Views, InPlaceAddOnSelectedRowUpdatesBase) {
  for (bool step : {false, true}) {
    SCOPED_TRACE(step ? "with mark_step" : "without mark_step");
    Tensor x = X();
    x.select(0, 1).add_(1);
    if (step) lazyx::mark_step();
    ExpectFloats(x, {0, 1, 2, 3, 5, 6, 7, 8, 8, 9, 10, 11});
    lazyx::mark_step();
    ExpectFloats(x, {0, 1, 2, 3, 5, 6, 7, 8, 8, 9, 10, 11});
  }
}

TEST(Views, InPlaceMulOnStridedSliceUpdatesBase) {
  for (bool step : {false, true}) {
    SCOPED_TRACE(step ? "with mark_step" : "without mark_step");
    Tensor x = X();
    Tensor s = x.slice(1, 0, 4, 2);
    s.mul_(2);
    if (step) lazyx::mark_step();
    ExpectFloats(x, {0, 1, 4, 3, 8, 5, 12, 7, 16, 9, 20, 11});
    ExpectFloats(s, {0, 4, 8, 12, 16, 20});
    lazyx::mark_step();
    ExpectFloats(x, {0, 1, 4, 3, 8, 5, 12, 7, 16, 9, 20, 11});
  }
}

TEST(Views, FillThroughTransposedSelectUpdatesBase) {
  // x.t().select(0, 0) is column 0 of x.
  for (bool step : {false, true}) {
    SCOPED_TRACE(step ? "with mark_step" : "without mark_step");
    Tensor x = X() + 1;  // a pending base: [[1,2,3,4],[5,6,7,8],[9,10,11,12]]
    x.t().select(0, 0).fill_(0);
    if (step) lazyx::mark_step();
    ExpectFloats(x, {0, 2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12});
    lazyx::mark_step();
    ExpectFloats(x, {0, 2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12});
  }
}

TEST(Views, InPlaceThroughViewOfViewOfView) {
  for (bool step : {false, true}) {
    SCOPED_TRACE(step ? "with mark_step" : "without mark_step");
    Tensor x = X();
    Tensor n = x.view({2, 6}).select(0, 1).narrow(0, 2, 3);
    if (step) lazyx::mark_step();
    n.fill_(-1);
    if (step) lazyx::mark_step();
    ExpectFloats(x, {0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, 11});
    ExpectFloats(n, {-1, -1, -1});
    // The intermediate views see it too.
    ExpectFloats(x.view({2, 6}).select(0, 1), {6, 7, -1, -1, -1, 11});
  }
}

TEST(Views, ViewTakenBeforeInPlaceUpdateOfBaseSeesIt) {
  Tensor x = X();
  Tensor v = x.select(0, 2);
  ExpectFloats(v, {8, 9, 10, 11});
  x.add_(10);
  ExpectFloats(v, {18, 19, 20, 21});
  lazyx::mark_step();
  ExpectFloats(v, {18, 19, 20, 21});
  x.mul_(2);
  lazyx::mark_step();
  ExpectFloats(v, {36, 38, 40, 42});
  x.zero_();
  ExpectFloats(v, {0, 0, 0, 0});
}

TEST(Views, ViewSeesUpdateThroughAnotherView) {
  Tensor x = X();
  Tensor col = x.select(1, 0);  // [0, 4, 8]
  Tensor row = x.select(0, 0);  // [0, 1, 2, 3]
  row.fill_(100);
  ExpectFloats(col, {100, 4, 8});
  lazyx::mark_step();
  ExpectFloats(col, {100, 4, 8});
  ExpectFloats(x, {100, 100, 100, 100, 4, 5, 6, 7, 8, 9, 10, 11});
  col.mul_(-1);
  lazyx::mark_step();
  ExpectFloats(row, {-100, 100, 100, 100});
  ExpectFloats(x, {-100, 100, 100, 100, -4, 5, 6, 7, -8, 9, 10, 11});
}

TEST(Views, CompoundAssignmentOnView) {
  Tensor x = X();
  Tensor r = x.select(0, 0);
  r += 5;
  r *= lazyx::tensor<float>({1, -1, 1, -1});
  ExpectFloats(x, {5, -6, 7, -8, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor c = x.select(1, 3);
  c -= 1;
  c /= 2;
  lazyx::mark_step();
  ExpectFloats(x, {5, -6, 7, -4.5, 4, 5, 6, 3, 8, 9, 10, 5});
}

TEST(Views, CopyIntoView) {
  Tensor x = X();
  x.select(1, 3).copy_(lazyx::tensor<float>({7, 8, 9}));
  ExpectFloats(x, {0, 1, 2, 7, 4, 5, 6, 8, 8, 9, 10, 9});
  // A broadcast copy into a strided slice.
  x.slice(0, 0, 3, 2).copy_(lazyx::tensor<float>({-1, -2, -3, -4}));
  lazyx::mark_step();
  ExpectFloats(x, {-1, -2, -3, -4, 4, 5, 6, 8, -1, -2, -3, -4});
}

TEST(Views, InPlaceOnPendingBaseThroughView) {
  Tensor x = X();
  Tensor y = x * 2;  // pending
  y.select(0, 0).add_(1);
  ExpectFloats(y, {1, 3, 5, 7, 8, 10, 12, 14, 16, 18, 20, 22});
  ExpectFloats(x, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor z = x * 3;
  z.t().select(0, 1).zero_();  // column 1 of z
  lazyx::mark_step();
  ExpectFloats(z, {0, 0, 6, 9, 12, 0, 18, 21, 24, 0, 30, 33});
}

TEST(Views, InPlaceThroughViewAcrossSteps) {
  Tensor x = X();
  Tensor v = x.t();
  lazyx::mark_step();
  Tensor w = v.slice(0, 1, 3);  // columns 1 and 2 of x
  lazyx::mark_step();
  w.mul_(-1);
  lazyx::mark_step();
  ExpectFloats(x, {0, -1, -2, 3, 4, -5, -6, 7, 8, -9, -10, 11});
  ExpectFloats(v.select(0, 2), {-2, -6, -10});
}

TEST(Views, InPlaceOrderOnBaseAndViewIsKept) {
  Tensor x = X();
  x.add_(1);
  x.select(0, 0).mul_(2);
  x.add_(1);
  // Row 0: (j + 1) * 2 + 1; other rows: 4 i + j + 2.
  ExpectFloats(x, {3, 5, 7, 9, 6, 7, 8, 9, 10, 11, 12, 13});
  x.select(0, 0).sub_(3);
  x.mul_(2);
  lazyx::mark_step();
  ExpectFloats(x, {0, 4, 8, 12, 12, 14, 16, 18, 20, 22, 24, 26});
}

TEST(Views, InPlaceThroughEveryViewKind) {
  Tensor x = X();
  // unsqueeze -> squeeze -> permute -> select: column 1 of x.
  x.unsqueeze(0).squeeze(0).permute({1, 0}).select(0, 1).zero_();
  // flatten -> narrow: the last two elements.
  x.flatten().narrow(0, 10, 2).fill_(7);
  // reshape (a view here) -> select: even flat positions of row 0 ([6,2] rows 0 and 1).
  x.reshape({6, 2}).narrow(0, 0, 2).select(1, 0).fill_(-1);
  // expand view read after the writes.
  Tensor e = x.select(0, 1).unsqueeze(0).expand({2, 4});
  lazyx::mark_step();
  ExpectFloats(x, {-1, 0, -1, 3, 4, 0, 6, 7, 8, 0, 7, 7});
  ExpectFloats(e, {4, 0, 6, 7, 4, 0, 6, 7});
  // transpose -> view -> select.
  x.transpose(0, 1).view({2, 2, 3}).select(0, 1).select(0, 1).add_(100);  // column 3
  ExpectFloats(x, {-1, 0, -1, 103, 4, 0, 6, 107, 8, 0, 7, 107});
}

TEST(Views, InPlaceOnReshapeCopyDoesNotReachBase) {
  Tensor x = X();
  Tensor r = x.t().reshape({12});  // a copy
  r.fill_(0);
  lazyx::mark_step();
  ExpectFloats(x, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  ExpectFloats(r, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST(Views, Contiguous) {
  Tensor x = X();
  Tensor c = x.t().contiguous();
  ExpectLayout(c, {4, 3}, {3, 1}, 0);
  EXPECT_TRUE(c.is_contiguous());
  ExpectFloats(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // A copy of a non-contiguous view: independent of the base.
  x.add_(1);
  ExpectFloats(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor s = x.slice(1, 1, 4, 2).contiguous();
  ExpectLayout(s, {3, 2}, {2, 1}, 0);
  lazyx::mark_step();
  ExpectFloats(s, {2, 4, 6, 8, 10, 12});
  ExpectFloats(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST(Views, ContiguousOfContiguousTensorIsItself) {
  // torch returns self when already contiguous, so in-place updates stay visible.
  Tensor x = X();
  Tensor c = x.contiguous();
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  x.add_(1);
  ExpectFloats(c, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST(Views, ValuesSurviveMarkStep) {
  Tensor x = X();
  Tensor a = x.view({4, 3});
  Tensor b = x.t();
  Tensor c = x.select(1, 1);
  Tensor d = x.slice(0, 0, 3, 2);
  Tensor e = x.narrow(1, 2, 2).unsqueeze(0);
  Tensor f = x.expand({2, 3, 4}).permute({2, 1, 0});
  lazyx::mark_step();
  lazyx::mark_step();
  ExpectFloats(a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  ExpectFloats(b, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  ExpectFloats(c, {1, 5, 9});
  ExpectFloats(d, {0, 1, 2, 3, 8, 9, 10, 11});
  ExpectLayout(e, {1, 3, 2}, {12, 4, 1}, 2);
  ExpectFloats(e, {2, 3, 6, 7, 10, 11});
  ExpectLayout(f, {4, 3, 2}, {1, 4, 0}, 0);
  ExpectFloats(f.select(0, 1), {1, 1, 5, 5, 9, 9});
  // And after an in-place update plus a step, every view shows it.
  x.mul_(10);
  lazyx::mark_step();
  ExpectFloats(c, {10, 50, 90});
  ExpectFloats(d, {0, 10, 20, 30, 80, 90, 100, 110});
  ExpectFloats(e, {20, 30, 60, 70, 100, 110});
  ExpectFloats(f.select(0, 3), {30, 30, 70, 70, 110, 110});
}

TEST(Views, ViewsOfPendingTensors) {
  // The base is not materialized yet; metadata is available without a sync.
  Tensor y = X() * 2 + 1;
  Tensor v = y.t().select(0, 3);
  ExpectLayout(v, {3}, {4}, 3);
  EXPECT_TRUE(v.is_view());
  ExpectFloats(v, {7, 15, 23});
  Tensor w = (X() - 1).view({2, 6}).slice(1, 4);
  lazyx::mark_step();
  ExpectFloats(w, {3, 4, 9, 10});
}

TEST(Views, ViewsOfViewsOutOfPlaceOps) {
  // Out-of-place ops on views read the right elements and produce fresh tensors.
  Tensor x = X();
  Tensor r = x.slice(1, 1, 3) * x.select(1, 0).unsqueeze(1);  // [3,2] * [3,1]
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_FALSE(r.is_view());
  ExpectFloats(r, {0, 0, 20, 24, 72, 80});
  lazyx::mark_step();
  ExpectFloats(r, {0, 0, 20, 24, 72, 80});
  EXPECT_DTYPE(r, kFloat32);
}

TEST(Views, SliceWithNonPositiveStepRaises) {
  // torch: "step must be greater than zero".
  EXPECT_THROW(X().slice(1, 0, 4, -1), lazyx::Error);
}

TEST(Views, ViewsOfExpandedTensors) {
  Tensor c = lazyx::tensor<float>({1, 2, 3}, {3, 1});
  Tensor e = c.expand({3, 4});
  ExpectLayout(e.select(1, 2), {3}, {1}, 0);
  ExpectLayout(e.t(), {4, 3}, {0, 1}, 0);
  ExpectFloats(e.t(), {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  // reshape of an expanded tensor must copy; the copy does not follow c.
  Tensor r = e.reshape({12});
  ExpectFloats(r, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  Tensor k = e.contiguous();
  ExpectLayout(k, {3, 4}, {4, 1}, 0);
  c.mul_(-1);
  lazyx::mark_step();
  ExpectFloats(r, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  ExpectFloats(k, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  ExpectFloats(e.select(1, 0), {-1, -2, -3});
}

TEST(Views, ViewOutlivesItsBaseHandle) {
  // The storage stays alive through the view when the base handle is gone.
  Tensor v;
  {
    Tensor x = X();
    v = x.select(0, 1);
  }
  v.add_(1);
  ExpectFloats(v, {5, 6, 7, 8});
  lazyx::mark_step();
  ExpectFloats(v, {5, 6, 7, 8});
  // A pending base, dropped, then written through the view.
  Tensor w;
  {
    Tensor x = X() * 2;
    w = x.t();
  }
  w.select(0, 0).fill_(0);  // column 0 of the dropped base
  lazyx::mark_step();
  ExpectFloats(w, {0, 0, 0, 2, 10, 18, 4, 12, 20, 6, 14, 22});
}

TEST(Views, InPlaceThroughViewOfIntegerBase) {
  Tensor i = lazyx::tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  i.select(1, 1).mul_(10);
  i.t().select(0, 2).sub_(1);
  EXPECT_DTYPE(i, kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 20, 2, 4, 50, 5}));
  lazyx::mark_step();
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 20, 2, 4, 50, 5}));
}

TEST(Views, CopyIntoViewConvertsDtype) {
  Tensor x = X();
  x.select(0, 0).copy_(lazyx::tensor<int64_t>({-1, -2, -3, -4}));
  x.select(1, 3).copy_(lazyx::tensor<bool>({true, false, true}));
  lazyx::mark_step();
  ExpectFloats(x, {-1, -2, -3, 1, 4, 5, 6, 0, 8, 9, 10, 1});
  EXPECT_DTYPE(x, kFloat32);
}

TEST(Views, InPlaceWithOperandsFromTheSameBase) {
  for (bool step : {false, true}) {
    SCOPED_TRACE(step ? "with mark_step" : "without mark_step");
    Tensor x = X();
    x.select(0, 0).add_(x.select(0, 1));  // row 0 = [4, 6, 8, 10]
    x.select(0, 1).zero_();               // must not reach the sum above
    if (step) lazyx::mark_step();
    x.select(0, 2).copy_(x.select(0, 0));  // row 2 = row 0
    ExpectFloats(x, {4, 6, 8, 10, 0, 0, 0, 0, 4, 6, 8, 10});
    x.mul_(x);  // the same tensor on both sides
    if (step) lazyx::mark_step();
    ExpectFloats(x, {16, 36, 64, 100, 0, 0, 0, 0, 16, 36, 64, 100});
    lazyx::mark_step();
    ExpectFloats(x, {16, 36, 64, 100, 0, 0, 0, 0, 16, 36, 64, 100});
  }
}

}  // namespace

namespace lazyx {
namespace {

TEST(Views, AsStridedWindowsAndStorageId) {
  Tensor x = tensor<float>({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  Tensor w = x.as_strided({3, 3}, {2, 1}, 1);  // overlapping windows, like unfold
  EXPECT_TRUE(w.is_view());
  EXPECT_EQ(w.storage_offset(), 1);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 3, 4, 5, 5, 6, 7}));
  EXPECT_EQ(w.storage_id(), x.id());
  EXPECT_EQ(x.select(0, 2).storage_id(), x.id());
  EXPECT_THROW(w.add_(1), Error);  // overlapping: writes would depend on their order
  Tensor ev = x.as_strided({2, 2}, {4, 2}, 0);  // [[0, 2], [4, 6]]: disjoint, writable
  ev.mul_(10);
  lazyx::mark_step();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 20, 3, 40, 5, 60, 7}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 20, 3, 3, 40, 5, 5, 60, 7}));
  try {
    (void)x.as_strided({3, 3}, {2, 1}, 2);  // reaches element 8 of 8
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[as_strided]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lazyx
