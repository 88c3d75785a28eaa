// Sort and Scan (and what is built from them) on every backend, against values computed here
// with plain loops: ties and stability, NaN ordering (largest), 0-d and empty inputs, integer
// and bool dtypes, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "test_util.h"

using namespace lazyx;
using lazyx::testing::expect_error;

namespace {

std::vector<std::string> backends() {
#ifdef LAZYX_TEST_HAVE_CPU
  return {"reference", "cpu"};
#else
  return {"reference"};
#endif
}

class SortScan : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { set_backend(GetParam()); }
};

const float kNan = std::nanf("");

// Row-major [2, 6] with ties and NaN.
std::vector<float> data() { return {3, 1, kNan, 1, -2, 3, 0, 5, 5, -1, kNan, 2}; }

// Expected stable argsort of one row: NaN largest.
std::vector<int64_t> ref_argsort(const std::vector<float>& row, bool desc) {
  std::vector<int64_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int64_t i) { return std::isnan(row[i]) ? INFINITY : row[i]; };
  auto rank = [&](int64_t i) { return std::isnan(row[i]) ? 1 : 0; };  // NaN above +inf
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    if (rank(a) != rank(b)) return desc ? rank(a) > rank(b) : rank(a) < rank(b);
    return desc ? key(a) > key(b) : key(a) < key(b);
  });
  return idx;
}

TEST_P(SortScan, ArgsortStableWithNaN) {
  std::vector<float> v = data();
  Tensor x = tensor<float>(v, {2, 6});
  for (bool desc : {false, true}) {
    std::vector<int64_t> got = argsort(x, 1, desc).to_vector<int64_t>();
    for (int r = 0; r < 2; ++r) {
      std::vector<float> row(v.begin() + 6 * r, v.begin() + 6 * r + 6);
      std::vector<int64_t> want = ref_argsort(row, desc);
      for (int k = 0; k < 6; ++k) EXPECT_EQ(got[6 * r + k], want[k]) << r << "," << k << desc;
    }
  }
  // Along dim 0 (a strided line): column 1 is {1, 5}, column 2 is {nan, 5}.
  std::vector<int64_t> d0 = argsort(x, 0).to_vector<int64_t>();
  EXPECT_EQ(d0[1], 0);
  EXPECT_EQ(d0[2], 1);
  EXPECT_EQ(d0[8], 0);
}

TEST_P(SortScan, SortValuesIntBoolZeroDimEmpty) {
  auto [v, i] = sort(tensor<int64_t>({5, -3, 5, 9000000000LL, -3}, {5}), 0, true);
  EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{9000000000LL, 5, 5, -3, -3}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2, 1, 4}));
  Tensor b = tensor<float>({1, 0, 1, 0}, {4}).to(kBool);
  EXPECT_EQ(argsort(b).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
  Tensor s = full({}, 2.5);
  auto [sv, si] = sort(s);
  EXPECT_EQ(sv.shape(), Shape{});
  EXPECT_FLOAT_EQ(sv.item<float>(), 2.5f);
  EXPECT_EQ(si.item<int64_t>(), 0);
  Tensor e = zeros({3, 0});
  EXPECT_EQ(argsort(e, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(cumsum(e, 1).shape(), (Shape{3, 0}));
}

TEST_P(SortScan, TopkAndKthvalue) {
  Tensor x = tensor<float>({4, 1, 5, 7, -1, 0}, {6});
  auto [v, i] = topk(x, 3);
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{7, 5, 4}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 2, 0}));
  // Ties: the values are determined, the indices are a set of positions holding them.
  auto [tv, ti] = topk(tensor<float>({2, 9, 2, 2, 9}, {5}), 3);
  EXPECT_EQ(tv.to_vector<float>(), (std::vector<float>{9, 9, 2}));
  std::vector<int64_t> tis = ti.to_vector<int64_t>();
  std::sort(tis.begin(), tis.begin() + 2);
  EXPECT_EQ(tis[0], 1);
  EXPECT_EQ(tis[1], 4);
  EXPECT_TRUE(tis[2] == 0 || tis[2] == 2 || tis[2] == 3);
  auto [sv, si] = topk(x, 2, 0, false);
  EXPECT_EQ(sv.to_vector<float>(), (std::vector<float>{-1, 0}));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  auto [kv, ki] = kthvalue(tensor<float>({3, 1, 2, 9, 8, 7}, {2, 3}), 2, 1, true);
  EXPECT_EQ(kv.shape(), (Shape{2, 1}));
  EXPECT_EQ(kv.to_vector<float>(), (std::vector<float>{2, 8}));
  EXPECT_EQ(ki.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
}

// Plain running scans of one line.
std::vector<double> ref_scan(const std::vector<double>& v, ScanKind k) {
  std::vector<double> out(v.size());
  double acc = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0) acc = v[0];
    else if (k == ScanKind::Sum) acc += v[i];
    else if (k == ScanKind::Prod) acc *= v[i];
    else if (k == ScanKind::LogSumExp) acc = std::log(std::exp(acc) + std::exp(v[i]));
    out[i] = acc;
  }
  return out;
}

TEST_P(SortScan, ScansFloat) {
  std::vector<double> v = {0.5, -1.25, 2, 0.75, -0.5, 1.5};
  Tensor x = tensor<double>(v, {6});
  for (ScanKind k : {ScanKind::Sum, ScanKind::Prod, ScanKind::LogSumExp}) {
    std::vector<double> got = scan(x, 0, k).to_vector<double>(), want = ref_scan(v, k);
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  }
  // Along dim 0 of [2, 3].
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(cumsum(m, 0).to_vector<float>(), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(cumprod(m, 1).to_vector<float>(), (std::vector<float>{1, 2, 6, 4, 20, 120}));
  // logcumsumexp keeps -inf and large values finite.
  std::vector<float> l = logcumsumexp(tensor<float>({-INFINITY, 1000, 1000}, {3}), 0)
                             .to_vector<float>();
  EXPECT_EQ(l[0], -INFINITY);
  EXPECT_FLOAT_EQ(l[1], 1000);
  EXPECT_NEAR(l[2], 1000 + std::log(2.0), 1e-3);
}

TEST_P(SortScan, CummaxCumminTiesAndNaN) {
  Tensor x = tensor<float>({1, 3, 3, 2, kNan, 5, kNan}, {7});
  auto [mv, mi] = cummax(x, 0);
  std::vector<float> v = mv.to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{1, 3, 3, 3}));
  for (int k = 4; k < 7; ++k) EXPECT_TRUE(std::isnan(v[k]));
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, 4, 4, 6}));
  auto [nv, ni] = cummin(tensor<int64_t>({4, 2, 2, 7, 1}, {5}), 0);
  EXPECT_EQ(nv.to_vector<int64_t>(), (std::vector<int64_t>{4, 2, 2, 2, 1}));
  EXPECT_EQ(ni.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, 4}));
}

TEST_P(SortScan, IntegerScansWidenToInt64) {
  Tensor x = tensor<int32_t>({2, 3, 4}, {3});
  Tensor c = cumsum(x, 0);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 9}));
  Tensor b = tensor<float>({1, 0, 1}, {3}).to(kBool);
  EXPECT_EQ(cumsum(b, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(prod(x).item<int64_t>(), 24);
  EXPECT_EQ(prod(x).dtype(), kInt64);
}

TEST_P(SortScan, ProdArgmin) {
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(prod(m, 1).to_vector<float>(), (std::vector<float>{6, 120}));
  EXPECT_EQ(prod(m, 0, true).shape(), (Shape{1, 3}));
  EXPECT_FLOAT_EQ(prod(zeros({0})).item<float>(), 1.0f);
  EXPECT_EQ(prod(zeros({2, 0}), 1).to_vector<float>(), (std::vector<float>{1, 1}));
  Tensor a = tensor<float>({3, -1, -1, kNan, 0, 2}, {2, 3});
  EXPECT_EQ(argmin(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(a).item<int64_t>(), 3);
  EXPECT_EQ(argmin(tensor<int64_t>({5, 2, 2}, {3})).item<int64_t>(), 1);
}

TEST_P(SortScan, TrilTriuFlipRoll) {
  Tensor m = tensor<float>(lazyx::testing::iota(12, 1), {3, 4});
  EXPECT_EQ(tril(m).to_vector<float>(),
            (std::vector<float>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_EQ(triu(m, 1).to_vector<float>(),
            (std::vector<float>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_EQ(tril(m, -1).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_EQ(flip(m, {0, 1}).to_vector<float>(),
            (std::vector<float>{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(roll(m, 1, 1).to_vector<float>(),
            (std::vector<float>{4, 1, 2, 3, 8, 5, 6, 7, 12, 9, 10, 11}));
  EXPECT_EQ(roll(m, -4, 0).to_vector<float>(), roll(m, 2, 0).to_vector<float>());
}

TEST_P(SortScan, ScatterReduce) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {4});
  Tensor idx = tensor<int64_t>({0, 0, 3, 1, 0}, {5});
  Tensor src = tensor<float>({5, -1, 2, kNan, 7}, {5});
  Tensor mx = scatter_reduce(x, 0, idx, src, ScatterKind::Amax);
  std::vector<float> m = mx.to_vector<float>();
  EXPECT_EQ(m[0], 7);
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_EQ(m[2], 3);
  EXPECT_EQ(m[3], 4);
  EXPECT_EQ(scatter_reduce(x, 0, idx, src, ScatterKind::Amin, false).to_vector<float>()[0], -1);
  EXPECT_EQ(scatter_reduce(x, 0, idx, src, ScatterKind::Prod).to_vector<float>()[0], -35);
  EXPECT_EQ(scatter_reduce(x, 0, idx, src, ScatterKind::Prod, false).to_vector<float>()[3], 2);
  Tensor xi = tensor<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(scatter_reduce(xi, 0, tensor<int64_t>({2, 2}, {2}), tensor<int64_t>({4, 5}, {2}),
                           ScatterKind::Prod).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 60}));
  expect_error([&] { scatter_reduce(x, 0, tensor<int64_t>({4}, {1}), src,
                                    ScatterKind::Amax).to_vector<float>(); },
               {"[scatter_reduce]", "out of range"});
}

TEST_P(SortScan, BadInput) {
  Tensor x = zeros({2, 3});
  expect_error([&] { topk(x, 4); }, {"[topk]", "out of range", "0 <= k <= 3"});
  expect_error([&] { kthvalue(x, 0); }, {"[kthvalue]", "1 <= k"});
  expect_error([&] { argsort(x, 2); }, {"[sort]", "out of range"});
  expect_error([&] { logcumsumexp(x.to(kInt64), 0); }, {"[logcumsumexp]"});
  expect_error([&] { tril(zeros({3})); }, {"[tril]", "at least 2 dimensions"});
  expect_error([&] { scan(x, -3, ScanKind::Sum); }, {"[scan]", "out of range"});
}

INSTANTIATE_TEST_SUITE_P(Backends, SortScan, ::testing::ValuesIn(backends()));

}  // namespace
