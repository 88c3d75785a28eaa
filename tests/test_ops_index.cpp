// Data movement, indexing, creation and random ops against hand-computed values.
// Suites: Index (clone, copy_, fill_, cat, stack, gather/scatter, index_*, masked_fill),
// Create (tensor, zeros, ones, full, arange, scalar_tensor) and Random (rand, randn, randint,
// manual_seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "lazyx/lazyx.h"
#include "ops_test_util.h"

namespace {

using namespace lazyx_ops_test;

// x[i][j] = 4 i + j, shape [3,4].
Tensor X() { return F32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}); }

// ---------------------------------------------------------------------------------------------
// clone / copy_ / fill_ / zero_

TEST(Index, CloneIsIndependent) {
  Tensor x = F32({1, 2, 3});
  Tensor c = x.clone();
  EXPECT_EQ(c.shape(), (Shape{3}));
  EXPECT_DTYPE(c, kFloat32);
  x.add_(1);
  ExpectFloats(c, {1, 2, 3});
  c.mul_(10);
  lazyx::mark_step();
  ExpectFloats(x, {2, 3, 4});
  ExpectFloats(c, {10, 20, 30});
  // Clone of a materialized tensor after a step, then an update of the original.
  Tensor d = x.clone();
  x.zero_();
  lazyx::mark_step();
  ExpectFloats(d, {2, 3, 4});
  ExpectFloats(x, {0, 0, 0});
}

TEST(Index, CloneOfViewAndOfPending) {
  Tensor x = X();
  Tensor c = x.t().clone();
  EXPECT_EQ(c.shape(), (Shape{4, 3}));
  EXPECT_FALSE(c.is_view());
  ExpectFloats(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  c.select(0, 0).fill_(-1);  // writes to the clone stay in the clone
  ExpectFloats(x.select(1, 0), {0, 4, 8});
  Tensor p = (x + 1).clone();
  lazyx::mark_step();
  ExpectFloats(p, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_DTYPE(lazyx::tensor<int32_t>({1}).clone(), kInt32);
}

TEST(Index, CopyBroadcasts) {
  Tensor x = lazyx::zeros({2, 3});
  Tensor& ref = x.copy_(F32({1, 2, 3}));
  EXPECT_EQ(&ref, &x);
  ExpectFloats(x, {1, 2, 3, 1, 2, 3});
  x.copy_(F32({7, 8}, {2, 1}));
  lazyx::mark_step();
  ExpectFloats(x, {7, 7, 7, 8, 8, 8});
  x.copy_(F32({5}, {}));
  ExpectFloats(x, {5, 5, 5, 5, 5, 5});
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
}

TEST(Index, CopyConvertsDtype) {
  Tensor f = lazyx::zeros({3});
  f.copy_(I64({1, -2, 3}));
  EXPECT_DTYPE(f, kFloat32);
  ExpectFloats(f, {1, -2, 3});
  // Float into int truncates toward zero.
  Tensor i = I64({0, 0, 0});
  i.copy_(F32({1.7f, -2.7f, 3.2f}));
  lazyx::mark_step();
  EXPECT_DTYPE(i, kInt64);
  ExpectInts(i, {1, -2, 3});
  Tensor b = lazyx::tensor<bool>({true, true, false});
  b.copy_(F32({0, 0.5, -1}));
  EXPECT_DTYPE(b, kBool);
  ExpectBools(b, {false, true, true});
  Tensor h = lazyx::zeros({1}, kFloat16);
  h.copy_(F32({0.1f}));
  EXPECT_DTYPE(h, kFloat16);
  EXPECT_EQ(h.item<float>(), 0.0999755859375f);
}

TEST(Index, CopyOfIncompatibleShapeRaises) {
  Tensor x = lazyx::zeros({2, 3});
  EXPECT_THROW(x.copy_(F32({1, 2})), lazyx::Error);
  EXPECT_THROW(x.copy_(lazyx::zeros({2, 3, 2})), lazyx::Error);
  ExpectFloats(x, {0, 0, 0, 0, 0, 0});
}

TEST(Index, FillAndZero) {
  Tensor x = F32({1, 2, 3, 4}, {2, 2});
  Tensor& ref = x.fill_(2.5);
  EXPECT_EQ(&ref, &x);
  ExpectFloats(x, {2.5, 2.5, 2.5, 2.5});
  x.zero_();
  lazyx::mark_step();
  ExpectFloats(x, {0, 0, 0, 0});
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
  Tensor i = I64({1, 2});
  i.fill_(3);
  EXPECT_DTYPE(i, kInt64);
  ExpectInts(i, {3, 3});
  i.fill_(2.7);  // converted to the tensor's dtype: truncated
  lazyx::mark_step();
  ExpectInts(i, {2, 2});
  Tensor b = lazyx::tensor<bool>({false, false});
  b.fill_(true);
  ExpectBools(b, {true, true});
  // fill_ then in-place arithmetic in the same step.
  Tensor y = lazyx::zeros({3});
  y.fill_(4);
  y.sub_(1);
  ExpectFloats(y, {3, 3, 3});
}

TEST(Index, FillValuesShareOneProgram) {
  Tensor x = lazyx::zeros({4});
  x.fill_(1);
  lazyx::mark_step();
  x.fill_(3);  // x now holds a buffer, which the fill overwrites in place: the program to reuse
  lazyx::mark_step();
  int64_t before = UncachedCompiles();
  x.fill_(2);
  lazyx::mark_step();
  ExpectFloats(x, {2, 2, 2, 2});
  EXPECT_EQ(UncachedCompiles(), before);
}

// ---------------------------------------------------------------------------------------------
// cat / stack

TEST(Index, Cat) {
  auto a = [] { return F32({1, 2, 3, 4}, {2, 2}); };
  BeforeAndAfterStep(
      [&] {
        return lazyx::cat({a(), F32({5, 6}, {1, 2})}, 0);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 2}));
        ExpectFloats(r, {1, 2, 3, 4, 5, 6});
      });
  BeforeAndAfterStep(
      [&] {
        return lazyx::cat({a(), F32({7, 8}, {2, 1})}, 1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {1, 2, 7, 3, 4, 8});
      });
  BeforeAndAfterStep(
      [&] {
        return lazyx::cat({F32({7, 8}, {2, 1}), a(), a()}, -1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 5}));
        ExpectFloats(r, {7, 1, 2, 1, 2, 8, 3, 4, 3, 4});
      });
  BeforeAndAfterStep([&] { return lazyx::cat({a()}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 2}));
                       ExpectFloats(r, {1, 2, 3, 4});
                     });
}

TEST(Index, CatOfViewsAndPromotion) {
  // Non-contiguous inputs: [[1,3],[2,4]] twice along dim 0.
  BeforeAndAfterStep(
      [] {
        Tensor a = F32({1, 2, 3, 4}, {2, 2});
        return lazyx::cat({a.t(), a.t() * 10}, 0);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{4, 2}));
        ExpectFloats(r, {1, 3, 2, 4, 10, 30, 20, 40});
      });
  // torch.cat promotes: int64 with float32 gives float32.
  BeforeAndAfterStep(
      [] {
        return lazyx::cat({I64({1, 2}), F32({0.5})});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {1, 2, 0.5});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::cat({I64({1, 2}), I64({3})});
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {1, 2, 3});
      });
}

TEST(Index, CatOfMismatchedShapesRaises) {
  EXPECT_THROW(lazyx::cat({F32({1, 2, 3, 4}, {2, 2}), F32({1, 2, 3}, {1, 3})}, 0), lazyx::Error);
  EXPECT_THROW(lazyx::cat({F32({1, 2}), F32({1, 2}, {1, 2})}, 0), lazyx::Error);
  EXPECT_THROW(lazyx::cat({F32({1, 2}), F32({3})}, 1), lazyx::Error);
}

TEST(Index, Stack) {
  auto parts = [] { return std::vector<Tensor>{F32({1, 2}), F32({3, 4}), F32({5, 6})}; };
  BeforeAndAfterStep([&] { return lazyx::stack(parts(), 0); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3, 2}));
                       ExpectFloats(r, {1, 2, 3, 4, 5, 6});
                     });
  BeforeAndAfterStep([&] { return lazyx::stack(parts(), 1); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {1, 3, 5, 2, 4, 6});
                     });
  BeforeAndAfterStep([&] { return lazyx::stack(parts(), -1); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       ExpectFloats(r, {1, 3, 5, 2, 4, 6});
                     });
  // Stacking 0-d tensors gives a vector.
  BeforeAndAfterStep(
      [] {
        return lazyx::stack({F32({7}, {}), F32({8}, {})});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2}));
        ExpectFloats(r, {7, 8});
      });
  EXPECT_THROW(lazyx::stack({F32({1, 2}), F32({1, 2, 3})}), lazyx::Error);
}

// ---------------------------------------------------------------------------------------------
// index_select / gather

TEST(Index, IndexSelect) {
  BeforeAndAfterStep(
      [] {
        return X().index_select(0, I64({2, 0}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 4}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {8, 9, 10, 11, 0, 1, 2, 3});
      });
  BeforeAndAfterStep(
      [] {
        return X().index_select(1, I64({3, 3, 1}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 3}));
        ExpectFloats(r, {3, 3, 1, 7, 7, 5, 11, 11, 9});
      });
  BeforeAndAfterStep(
      [] {
        return X().index_select(-1, lazyx::tensor<int32_t>({0, 2}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 2}));
        ExpectFloats(r, {0, 2, 4, 6, 8, 10});
      });
  // From a view, with a pending index.
  BeforeAndAfterStep(
      [] {
        return X().t().index_select(0, I64({1, 0}) * 2);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {2, 6, 10, 0, 4, 8});
      });
  BeforeAndAfterStep(
      [] {
        return I64({10, 20, 30}).index_select(0, I64({2, 2}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {30, 30});
      });
}

TEST(Index, Gather) {
  auto t = [] { return F32({1, 2, 3, 4}, {2, 2}); };
  BeforeAndAfterStep(
      [&] {
        return t().gather(1, I64({0, 0, 1, 0}, {2, 2}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {1, 1, 4, 3});
      });
  BeforeAndAfterStep(
      [&] {
        return t().gather(0, I64({0, 1, 1, 0}, {2, 2}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 4, 3, 2});
      });
  // The index may be smaller than the input along other dims.
  BeforeAndAfterStep(
      [&] {
        return t().gather(1, I64({1, 0}, {2, 1}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 1}));
        ExpectFloats(r, {2, 3});
      });
  BeforeAndAfterStep(
      [] {
        return X().gather(-1, I64({3, 0, 1, 1, 2, 3}, {3, 2}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 2}));
        ExpectFloats(r, {3, 0, 5, 5, 10, 11});
      });
}

// ---------------------------------------------------------------------------------------------
// scatter / scatter_add

TEST(Index, Scatter) {
  // The PyTorch docs example: src = [[1..5],[6..10]].
  auto src = [] { return F32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5}); };
  BeforeAndAfterStep(
      [&] {
        return lazyx::zeros({3, 5}).scatter(0, I64({0, 1, 2, 0}, {1, 4}), src());
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 5}));
        ExpectFloats(r, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
      });
  BeforeAndAfterStep(
      [&] {
        return lazyx::zeros({3, 5}).scatter(1, I64({0, 1, 2, 0, 1, 4}, {2, 3}), src());
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0});
      });
}

TEST(Index, ScatterOutOfPlaceAndInPlace) {
  Tensor x = F32({1, 1, 1, 1});
  Tensor r = x.scatter(0, I64({3, 0}), F32({5, 6}));
  ExpectFloats(r, {6, 1, 1, 5});
  ExpectFloats(x, {1, 1, 1, 1});  // out-of-place leaves x alone
  Tensor& ref = x.scatter_(0, I64({1}), F32({9}));
  EXPECT_EQ(&ref, &x);
  lazyx::mark_step();
  ExpectFloats(x, {1, 9, 1, 1});
  ExpectFloats(r, {6, 1, 1, 5});
}

TEST(Index, ScatterAdd) {
  BeforeAndAfterStep(
      [] {
        return lazyx::zeros({3}).scatter_add(0, I64({0, 1, 0, 2, 1}), F32({1, 2, 3, 4, 5}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        ExpectFloats(r, {4, 7, 4});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::ones({2, 3}).scatter_add(1, I64({0, 0, 2, 1, 1, 1}, {2, 3}),
                                               F32({1, 2, 3, 4, 5, 6}, {2, 3}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {4, 1, 4, 1, 16, 1});
      });
}

TEST(Index, ScatterAddInPlace) {
  Tensor x = lazyx::ones({3});
  x.scatter_add_(0, I64({0, 1, 0, 2, 1}), F32({1, 2, 3, 4, 5}));
  ExpectFloats(x, {5, 8, 5});
  x.scatter_add_(0, I64({2, 2}), F32({1, 1}));
  lazyx::mark_step();
  ExpectFloats(x, {5, 8, 7});
  Tensor i = lazyx::zeros({2}, kInt64);
  i.scatter_add_(0, I64({1, 1, 1}), I64({1, 2, 3}));
  EXPECT_DTYPE(i, kInt64);
  ExpectInts(i, {0, 6});
}

// ---------------------------------------------------------------------------------------------
// index_copy / index_put_ / masked_fill

TEST(Index, IndexCopyInPlace) {
  Tensor x = lazyx::zeros({5, 3});
  Tensor& ref = x.index_copy_(0, I64({0, 4, 2}), F32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}));
  EXPECT_EQ(&ref, &x);
  ExpectFloats(x, {1, 2, 3, 0, 0, 0, 7, 8, 9, 0, 0, 0, 4, 5, 6});
  lazyx::mark_step();
  ExpectFloats(x, {1, 2, 3, 0, 0, 0, 7, 8, 9, 0, 0, 0, 4, 5, 6});
  Tensor y = lazyx::zeros({2, 4});
  y.index_copy_(1, I64({3, 0}), F32({1, 2, 3, 4}, {2, 2}));
  lazyx::mark_step();
  ExpectFloats(y, {2, 0, 0, 1, 4, 0, 0, 3});
}

TEST(Index, IndexCopyOutOfPlace) {
  Tensor x = lazyx::zeros({3, 2});
  Tensor r = x.index_copy(0, I64({1}), F32({5, 6}, {1, 2}));
  lazyx::mark_step();
  ExpectFloats(r, {0, 0, 5, 6, 0, 0});
  ExpectFloats(x, {0, 0, 0, 0, 0, 0});
}

TEST(Index, IndexPut) {
  Tensor x = lazyx::zeros({5});
  Tensor& ref = x.index_put_({I64({0, 2})}, F32({1, 2}));
  EXPECT_EQ(&ref, &x);
  ExpectFloats(x, {1, 0, 2, 0, 0});
  // A 0-d value broadcasts; -1 is the last element.
  x.index_put_({I64({-1, 1})}, F32({9}, {}));
  lazyx::mark_step();
  ExpectFloats(x, {1, 9, 2, 0, 9});
  // Without accumulate, an index_put_ overwrites.
  x.index_put_({I64({0})}, F32({-3}));
  ExpectFloats(x, {-3, 9, 2, 0, 9});
}

TEST(Index, IndexPutTwoDims) {
  // x[[0, 2], [1, 0]] = [5, 6].
  Tensor x = lazyx::zeros({3, 3});
  x.index_put_({I64({0, 2}), I64({1, 0})}, F32({5, 6}));
  lazyx::mark_step();
  ExpectFloats(x, {0, 5, 0, 0, 0, 0, 6, 0, 0});
  // Only the first dim indexed: whole rows, x[[2, 0]] = [[1, 2], [3, 4]].
  Tensor y = lazyx::zeros({3, 2});
  y.index_put_({I64({2, 0})}, F32({1, 2, 3, 4}, {2, 2}));
  ExpectFloats(y, {3, 4, 0, 0, 1, 2});
  // A row value broadcast to every indexed row.
  Tensor z = lazyx::zeros({3, 2});
  z.index_put_({I64({0, 1})}, F32({7, 8}));
  lazyx::mark_step();
  ExpectFloats(z, {7, 8, 7, 8, 0, 0});
}

TEST(Index, IndexPutAccumulateWithDuplicates) {
  // Duplicate indices accumulate every value: position 1 gets 1 + 2, position 3 gets 3.
  Tensor x = lazyx::ones({5});
  x.index_put_({I64({1, 1, 3})}, F32({1, 2, 3}), true);
  ExpectFloats(x, {1, 4, 1, 4, 1});
  x.index_put_({I64({0, 0, 0, 0})}, F32({1}, {}), true);
  lazyx::mark_step();
  ExpectFloats(x, {5, 4, 1, 4, 1});
  // Two dims: (0, 1) twice and (1, 0) once.
  Tensor y = lazyx::zeros({2, 2});
  y.index_put_({I64({0, 0, 1}), I64({1, 1, 0})}, F32({1, 2, 3}), true);
  lazyx::mark_step();
  ExpectFloats(y, {0, 3, 3, 0});
  // Integer accumulation.
  Tensor i = lazyx::zeros({3}, kInt64);
  i.index_put_({I64({2, 2, 0})}, I64({5, 6, 7}), true);
  EXPECT_DTYPE(i, kInt64);
  ExpectInts(i, {7, 0, 11});
}

TEST(Index, IndexPutThroughView) {
  // index_put_ on a row view writes into the base.
  Tensor x = lazyx::zeros({2, 3});
  x.select(0, 1).index_put_({I64({0, 2})}, F32({4, 5}));
  lazyx::mark_step();
  ExpectFloats(x, {0, 0, 0, 4, 0, 5});
}

TEST(Index, MaskedFill) {
  auto x = [] { return F32({1, 2, 3, 4}, {2, 2}); };
  BeforeAndAfterStep(
      [&] {
        return x().masked_fill(lazyx::tensor<bool>({true, false, false, true}, {2, 2}), -1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {-1, 2, 3, -1});
      });
  // A [2] mask broadcasts over rows.
  BeforeAndAfterStep(
      [&] {
        return x().masked_fill(lazyx::tensor<bool>({false, true}), 0.5);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 0.5, 3, 0.5});
      });
  // A mask computed from the tensor itself.
  BeforeAndAfterStep(
      [&] {
        Tensor t = x();
        return t.masked_fill(t.gt(2), 0);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 2, 0, 0});
      });
  BeforeAndAfterStep(
      [] {
        return I64({1, 2, 3}).masked_fill(lazyx::tensor<bool>({true, false, true}), 9);
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        ExpectInts(r, {9, 2, 9});
      });
}

TEST(Index, MaskedFillInPlace) {
  Tensor x = F32({1, -2, 3, -4});
  Tensor& ref = x.masked_fill_(x.lt(0), 0);
  EXPECT_EQ(&ref, &x);
  ExpectFloats(x, {1, 0, 3, 0});
  x.masked_fill_(lazyx::tensor<bool>({true, false, false, false}), 7);
  lazyx::mark_step();
  ExpectFloats(x, {7, 0, 3, 0});
}

TEST(Index, OutOfRangeIndicesRaise) {
  Tensor x = X();
  EXPECT_THROW(
      {
        Tensor r = x.index_select(0, I64({3}));
        r.to_vector<float>();
      },
      lazyx::Error);
  EXPECT_THROW(
      {
        Tensor r = x.gather(1, I64({4, 0, 0}, {3, 1}));
        r.to_vector<float>();
      },
      lazyx::Error);
  EXPECT_THROW(
      {
        Tensor r = lazyx::zeros({3}).scatter(0, I64({5}), F32({1}));
        r.to_vector<float>();
      },
      lazyx::Error);
  // A failed op leaves x intact and later steps still work.
  lazyx::mark_step();
  ExpectFloats(x, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
}

TEST(Index, InPlaceIndexOpsThroughViews) {
  // scatter_ into a transposed view: t[2][0] = 5 and t[0][1] = 6 are x[0][2] and x[1][0].
  Tensor x = lazyx::zeros({2, 3});
  x.t().scatter_(0, I64({2, 0}, {1, 2}), F32({5, 6}, {1, 2}));
  ExpectFloats(x, {0, 0, 5, 6, 0, 0});
  // index_copy_ into row 1 of a transposed view is column 1 of the base.
  Tensor y = lazyx::zeros({3, 3});
  y.t().index_copy_(0, I64({1}), F32({1, 2, 3}, {1, 3}));
  lazyx::mark_step();
  ExpectFloats(y, {0, 1, 0, 0, 2, 0, 0, 3, 0});
  // masked_fill_ on a row view.
  Tensor z = F32({1, 2, 3, 4}, {2, 2});
  z.select(0, 1).masked_fill_(lazyx::tensor<bool>({false, true}), -1);
  ExpectFloats(z, {1, 2, 3, -1});
  // scatter_add_ on a strided slice: columns 0 and 2.
  Tensor w = lazyx::zeros({1, 4});
  w.slice(1, 0, 4, 2).scatter_add_(1, I64({1, 1}, {1, 2}), F32({2, 3}, {1, 2}));
  lazyx::mark_step();
  ExpectFloats(w, {0, 0, 5, 0});
}

TEST(Index, CloneOfMaterializedTensorIsCopyOnWrite) {
  // Clones of materialized tensors share the buffer until one of them is written.
  Tensor x = F32({1, 2, 3});
  Tensor c = x.clone();
  c.add_(1);
  ExpectFloats(x, {1, 2, 3});
  lazyx::mark_step();
  ExpectFloats(x, {1, 2, 3});
  ExpectFloats(c, {2, 3, 4});
  Tensor d = c.clone();
  c.zero_();
  lazyx::mark_step();
  ExpectFloats(d, {2, 3, 4});
  ExpectFloats(c, {0, 0, 0});
  d.mul_(2);
  lazyx::mark_step();
  ExpectFloats(d, {4, 6, 8});
  ExpectFloats(c, {0, 0, 0});
}

TEST(Index, CopyFromViewAndCatWithEmpty) {
  Tensor x = lazyx::zeros({2, 2});
  x.copy_(F32({1, 2, 3, 4}, {2, 2}).t());
  ExpectFloats(x, {1, 3, 2, 4});
  BeforeAndAfterStep(
      [] {
        return lazyx::cat({F32({1, 2}), lazyx::zeros({0})});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2}));
        ExpectFloats(r, {1, 2});
      });
}

// ---------------------------------------------------------------------------------------------
// Creation

TEST(Create, TensorFromHostValues) {
  Tensor f = lazyx::tensor<float>({1.5, -2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(f.strides(), (Shape{3, 1}));
  EXPECT_DTYPE(f, kFloat32);
  EXPECT_FALSE(f.is_pending());  // uploaded now
  EXPECT_FALSE(f.is_view());
  ExpectFloats(f, {1.5, -2, 3, 4, 5, 6});
  Tensor d = lazyx::tensor<double>({0.1, 0.2});
  EXPECT_DTYPE(d, kFloat64);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  Tensor i32 = lazyx::tensor<int32_t>({-1, 2});
  EXPECT_DTYPE(i32, kInt32);
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{-1, 2}));
  Tensor i64 = lazyx::tensor<int64_t>({1LL << 40, -3});
  EXPECT_DTYPE(i64, kInt64);
  ExpectInts(i64, {1LL << 40, -3});
  Tensor b = lazyx::tensor<bool>({true, false, true});
  EXPECT_DTYPE(b, kBool);
  ExpectBools(b, {true, false, true});
  Tensor s = lazyx::tensor<float>({2.5}, {});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_FLOAT_EQ(s.item<float>(), 2.5f);
  lazyx::mark_step();
  ExpectFloats(f, {1.5, -2, 3, 4, 5, 6});
}

TEST(Create, TensorWithWrongNumberOfValuesRaises) {
  EXPECT_THROW(lazyx::tensor<float>({1, 2, 3}, {2, 2}), lazyx::Error);
  EXPECT_THROW(lazyx::tensor<float>({1, 2}, {}), lazyx::Error);
}

TEST(Create, ZerosAndOnes) {
  BeforeAndAfterStep(
      [] {
        return lazyx::zeros({2, 3});
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {0, 0, 0, 0, 0, 0});
      });
  BeforeAndAfterStep([] { return lazyx::ones({3}, kInt64); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kInt64);
                       ExpectInts(r, {1, 1, 1});
                     });
  BeforeAndAfterStep([] { return lazyx::ones({2}, kBool); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {true, true});
                     });
  BeforeAndAfterStep(
      [] {
        return lazyx::zeros({2, 2}, kFloat16) + 1;
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        ExpectFloats(r, {1, 1, 1, 1});
      });
  BeforeAndAfterStep([] { return lazyx::ones({}); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{}));
                       EXPECT_FLOAT_EQ(r.item<float>(), 1);
                     });
  // Creation is lazy until a sync.
  Tensor z = lazyx::zeros({4});
  EXPECT_TRUE(z.is_pending());
  lazyx::mark_step();
  EXPECT_FALSE(z.is_pending());
}

TEST(Create, ZerosLikeAndOnesLike) {
  Tensor base = lazyx::tensor<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor z = lazyx::zeros_like(base);
  Tensor o = lazyx::ones_like(base.t());
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_DTYPE(z, kInt32);
  EXPECT_EQ(o.shape(), (Shape{2, 3}));
  EXPECT_DTYPE(o, kInt32);
  lazyx::mark_step();
  ExpectInts(z, {0, 0, 0, 0, 0, 0});
  ExpectInts(o, {1, 1, 1, 1, 1, 1});
}

TEST(Create, Full) {
  BeforeAndAfterStep(
      [] {
        return lazyx::full({2, 2}, 2.5);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, {2.5, 2.5, 2.5, 2.5});
      });
  // The dtype follows the value, as torch.full: an int fill gives int64, a bool fill bool.
  BeforeAndAfterStep([] { return lazyx::full({3}, 7); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kInt64);
                       ExpectInts(r, {7, 7, 7});
                     });
  BeforeAndAfterStep([] { return lazyx::full({2}, true); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kBool);
                       ExpectBools(r, {true, true});
                     });
  BeforeAndAfterStep([] { return lazyx::full({2}, 7, kFloat32); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {7, 7});
                     });
  BeforeAndAfterStep(
      [] { return lazyx::full({2}, 0.1, kFloat16); },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0.0999755859375f, 0.0999755859375f}));
      });
  BeforeAndAfterStep([] { return lazyx::full({1}, -3.5, kFloat64); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat64);
                       EXPECT_EQ(r.item<double>(), -3.5);
                     });
}

TEST(Create, ArangeIntegers) {
  BeforeAndAfterStep([] { return lazyx::arange(5); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{5}));
                       EXPECT_DTYPE(r, kInt64);
                       ExpectInts(r, {0, 1, 2, 3, 4});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(1, 10, 3); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kInt64);
                       ExpectInts(r, {1, 4, 7});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(5, 0, -2); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3}));
                       ExpectInts(r, {5, 3, 1});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(-2, 2); },
                     [](const Tensor& r) {
                       ExpectInts(r, {-2, -1, 0, 1});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(2, 2); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{0}));
                       EXPECT_EQ(r.numel(), 0);
                     });
}

TEST(Create, ArangeFloats) {
  BeforeAndAfterStep([] { return lazyx::arange(5.0); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {0, 1, 2, 3, 4});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(0.0, 1.0, 0.25); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{4}));
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {0, 0.25, 0.5, 0.75});
                     });
  // ceil((1 - 0) / 0.3) = 4 elements.
  BeforeAndAfterStep([] { return lazyx::arange(0, 1, 0.3); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{4}));
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {0, 0.3f, 0.6f, 0.9f});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(-1.5, 1.0, 0.5); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{5}));
                       ExpectFloats(r, {-1.5, -1, -0.5, 0, 0.5});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(0, 4, 1, kFloat32); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {0, 1, 2, 3});
                     });
  BeforeAndAfterStep([] { return lazyx::arange(0, 3, 1, kFloat64); },
                     [](const Tensor& r) {
                       EXPECT_DTYPE(r, kFloat64);
                       EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{0, 1, 2}));
                     });
}

TEST(Create, ArangeWithZeroStepRaises) {
  EXPECT_THROW(lazyx::arange(0, 5, 0), lazyx::Error);
  // Step sign against the range.
  EXPECT_THROW(lazyx::arange(0, 5, -1), lazyx::Error);
}

TEST(Create, ScalarTensor) {
  Tensor a = lazyx::scalar_tensor(3.5);
  EXPECT_EQ(a.shape(), (Shape{}));
  EXPECT_DTYPE(a, kFloat32);
  EXPECT_FLOAT_EQ(a.item<float>(), 3.5f);
  Tensor b = lazyx::scalar_tensor(2, kInt64);
  EXPECT_DTYPE(b, kInt64);
  EXPECT_EQ(b.item<int64_t>(), 2);
  Tensor c = lazyx::scalar_tensor(true, kBool);
  EXPECT_DTYPE(c, kBool);
  EXPECT_TRUE(c.item<bool>());
  // Used as an operand: a 0-d tensor does not widen f16.
  Tensor h = lazyx::ones({2}, kFloat16) * lazyx::scalar_tensor(3.0, kFloat64);
  EXPECT_DTYPE(h, kFloat16);
  lazyx::mark_step();
  ExpectFloats(h, {3, 3});
  EXPECT_FLOAT_EQ(a.item<float>(), 3.5f);
  // The cached constant is shared, but in-place use of the result must not change it.
  Tensor x = lazyx::scalar_tensor(3.5) + 0;
  x.add_(1);
  lazyx::mark_step();
  EXPECT_FLOAT_EQ(x.item<float>(), 4.5f);
  EXPECT_FLOAT_EQ(lazyx::scalar_tensor(3.5).item<float>(), 3.5f);
}

TEST(Create, ScalarTensorDefaultsToFloat32) {
  // torch.scalar_tensor(7) is float32 (the default dtype), unlike torch.tensor(7).
  Tensor s = lazyx::scalar_tensor(7);
  EXPECT_DTYPE(s, kFloat32);
  EXPECT_FLOAT_EQ(s.item<float>(), 7);
}

// ---------------------------------------------------------------------------------------------
// Random numbers

TEST(Random, RandIsUniformInUnitInterval) {
  lazyx::manual_seed(123);
  Tensor r = lazyx::rand({10000});
  EXPECT_EQ(r.shape(), (Shape{10000}));
  EXPECT_DTYPE(r, kFloat32);
  std::vector<float> v = r.to_vector<float>();
  double sum = 0;
  int below_tenth = 0;
  int above_ninetenths = 0;
  for (float f : v) {
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    sum += f;
    below_tenth += f < 0.1f;
    above_ninetenths += f >= 0.9f;
  }
  // Mean 0.5 with std 0.29 / sqrt(10000) = 0.003; each decile holds ~1000 +- 30.
  EXPECT_NEAR(sum / v.size(), 0.5, 0.02);
  EXPECT_NEAR(below_tenth, 1000, 150);
  EXPECT_NEAR(above_ninetenths, 1000, 150);
  std::set<float> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), 9000u);
}

TEST(Random, RandnHasMeanZeroStdOne) {
  lazyx::manual_seed(321);
  Tensor r = lazyx::randn({100, 100});
  EXPECT_EQ(r.shape(), (Shape{100, 100}));
  EXPECT_DTYPE(r, kFloat32);
  lazyx::mark_step();
  std::vector<float> v = r.to_vector<float>();
  ASSERT_EQ(v.size(), 10000u);
  double sum = 0;
  double sq = 0;
  int beyond_two = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    sum += f;
    sq += static_cast<double>(f) * f;
    beyond_two += std::abs(f) > 2;
  }
  double mean = sum / v.size();
  double std = std::sqrt(sq / v.size() - mean * mean);
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(std, 1, 0.05);
  // P(|z| > 2) = 4.55%.
  EXPECT_NEAR(beyond_two, 455, 100);
}

TEST(Random, RandintIsInHalfOpenRange) {
  lazyx::manual_seed(7);
  Tensor r = lazyx::randint(3, 7, {10000});
  EXPECT_EQ(r.shape(), (Shape{10000}));
  EXPECT_DTYPE(r, kInt64);
  std::vector<int64_t> v = r.to_vector<int64_t>();
  std::vector<int> counts(4, 0);
  for (int64_t i : v) {
    ASSERT_GE(i, 3);
    ASSERT_LT(i, 7);
    ++counts[i - 3];
  }
  for (int c : counts) EXPECT_NEAR(c, 2500, 250);
  Tensor n = lazyx::randint(-2, 2, {1000}, kInt32);
  EXPECT_DTYPE(n, kInt32);
  lazyx::mark_step();
  std::vector<int64_t> w = n.to_vector<int64_t>();
  EXPECT_EQ(*std::min_element(w.begin(), w.end()), -2);
  EXPECT_EQ(*std::max_element(w.begin(), w.end()), 1);
}

TEST(Random, OtherDtypes) {
  lazyx::manual_seed(1);
  Tensor d = lazyx::rand({1000}, kFloat64);
  Tensor h = lazyx::randn({1000}, kFloat16);
  EXPECT_DTYPE(d, kFloat64);
  EXPECT_DTYPE(h, kFloat16);
  lazyx::mark_step();
  for (double x : d.to_vector<double>()) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
  for (float x : h.to_vector<float>()) ASSERT_TRUE(std::isfinite(x));
}

TEST(Random, SameSeedSameValues) {
  lazyx::manual_seed(42);
  std::vector<float> a = lazyx::rand({100}).to_vector<float>();
  std::vector<float> an = lazyx::randn({50}).to_vector<float>();
  lazyx::manual_seed(42);
  std::vector<float> b = lazyx::rand({100}).to_vector<float>();
  std::vector<float> bn = lazyx::randn({50}).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_EQ(an, bn);
  lazyx::manual_seed(43);
  std::vector<float> c = lazyx::rand({100}).to_vector<float>();
  EXPECT_NE(a, c);
  lazyx::manual_seed(5);
  std::vector<int64_t> i1 = lazyx::randint(0, 1000, {64}).to_vector<int64_t>();
  lazyx::manual_seed(5);
  std::vector<int64_t> i2 = lazyx::randint(0, 1000, {64}).to_vector<int64_t>();
  lazyx::manual_seed(6);
  std::vector<int64_t> i3 = lazyx::randint(0, 1000, {64}).to_vector<int64_t>();
  EXPECT_EQ(i1, i2);
  EXPECT_NE(i1, i3);
}

TEST(Random, SameSeedSameValuesThroughMarkStep) {
  lazyx::manual_seed(9);
  Tensor a = lazyx::rand({64});
  lazyx::mark_step();
  lazyx::manual_seed(9);
  Tensor b = lazyx::rand({64});
  lazyx::mark_step();
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  // Both still pending when the seed is reset: each draw keeps the seed it was traced with.
  lazyx::manual_seed(11);
  Tensor c = lazyx::rand({64});
  lazyx::manual_seed(11);
  Tensor d = lazyx::rand({64});
  lazyx::mark_step();
  EXPECT_EQ(c.to_vector<float>(), d.to_vector<float>());
  EXPECT_NE(c.to_vector<float>(), a.to_vector<float>());
}

TEST(Random, ConsecutiveDrawsDiffer) {
  lazyx::manual_seed(3);
  Tensor a = lazyx::rand({64});
  Tensor b = lazyx::rand({64});  // same graph, no reseed: the generator advanced
  lazyx::mark_step();
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  Tensor c = lazyx::rand({64});
  lazyx::mark_step();
  EXPECT_NE(c.to_vector<float>(), a.to_vector<float>());
  EXPECT_NE(c.to_vector<float>(), b.to_vector<float>());
}

TEST(Random, NewSeedDoesNotRecompile) {
  lazyx::manual_seed(1);
  Tensor r = lazyx::rand({16}) * 2;
  lazyx::mark_step();
  std::vector<float> first = r.to_vector<float>();
  int64_t before = UncachedCompiles();
  lazyx::manual_seed(2);
  r = lazyx::rand({16}) * 2;  // the same graph
  lazyx::mark_step();
  std::vector<float> second = r.to_vector<float>();
  EXPECT_EQ(UncachedCompiles(), before);
  EXPECT_NE(first, second);
  // Nor does advancing the generator without a reseed.
  r = lazyx::rand({16}) * 2;
  lazyx::mark_step();
  EXPECT_EQ(UncachedCompiles(), before);
  EXPECT_NE(r.to_vector<float>(), second);
}

}  // namespace
