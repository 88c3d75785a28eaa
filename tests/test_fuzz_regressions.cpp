// Regression tests from lazyx-fuzz (tools/fuzz, docs/FUZZING.md). Each test is the fuzzer's
// emitted C++ for one program: paste new ones below, with a comment saying what they cover.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lazyx/lazyx.h"
#include "tensor/tensor_impl.h"

namespace {

// The helpers every emitted test defines, as a fixture so pasted tests may also use them.
#define LAZYX_FUZZ_PRELUDE(backend)                                                             \
  using namespace lazyx;                                                                          \
  set_backend(backend);                                                                           \
  mark_step();                                                                                    \
  clear_program_cache();                                                                          \
  auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want) {      \
    ASSERT_EQ(got.size(), want.size());                                                           \
    double scale = 0;                                                                             \
    for (double w : want) scale = std::max(scale, std::fabs(w));                                  \
    for (size_t i = 0; i < want.size(); ++i) {                                                    \
      EXPECT_NEAR(got[i], want[i], 1e-3 + 1e-4 * std::fabs(want[i]) + 1e-5 * scale) << "element " << i; \
    }                                                                                             \
  };                                                                                              \
  auto donated_in_place = [](const Tensor& t) {                                                   \
    StepReport r = last_step();                                                                   \
    for (const auto& p : r.params) {                                                              \
      if (p.donated && p.reason == AliasReason::InPlaceUpdate &&                                  \
          p.output_tensor_id == t.impl()->storage()->id())                                        \
        return true;                                                                              \
    }                                                                                             \
    return false;                                                                                 \
  };                                                                                              \
  (void)expect_values;                                                                            \
  (void)donated_in_place

// lazyx-fuzz --seed 11 --case 108 --backend cpu. `a + alpha * b` rounded the product first on the
// cpu backend (one rounding in torch and the reference): -1 + (-1.5 * (1 / -1.5)) came out 0, not
// 2.98e-8, and a later `masked_fill_(where(...) > 0)` flipped.
TEST(FuzzRegression, Seed11Case108_cpu) {
  using namespace lazyx;
  for (const std::string& backend : backend_names()) {
    SCOPED_TRACE(backend);
    set_backend(backend);
    mark_step();
    clear_program_cache();
    Tensor t3 = tensor<float>({-1, -1.5, -1.5, 0.5, 2, -1, -0.25, -0.5}, Shape{2, 4}).select(0, 1);
    Tensor t1 = arange(0, 24, 1, kFloat32).reshape({2, 3, 4});
    Tensor t5 = t3.clamp(Scalar(-1.0), Scalar(1.5));
    Tensor t0 = t5.add(t1.div(-1.5), -1.5);
    Tensor sum = t0.clone();
    Tensor t4 = where(t5.gt(t0), t5, t0);
    t0.masked_fill_(t4.gt(0), 0.25);
    mark_step();
    const float near_zero = sum.to_vector<float>()[1];
    const float want = std::fma(-1.5f, 1.0f / -1.5f, -1.0f);
    EXPECT_EQ(near_zero, want);
    for (float v : t0.to_vector<float>()) EXPECT_EQ(v, 0.25f);
  }
}

}  // namespace

// BUG (for the lead, src/graph/donation.cpp): a user-requested donation takes the output of a
// tensor updated in place, so that tensor's own alias source is kept ("no matching output") and
// another output is freshly allocated. Rules 1 and 5 say t2's buffer must be donated and nothing
// allocated: t0's flagged buffer could have gone to t4's output (same 16 bytes) instead.
// Found by `lazyx-fuzz --seed 1 --cases 3000 --strict` (case 70), shrunk from 39 to 5 instructions.
TEST(FuzzRegression, UserDonationTakesTheOutputOfAnInPlaceTensor) {
  LAZYX_FUZZ_PRELUDE("reference");
  Tensor t0, t1, t2, t3, t4, t5;
  t0 = tensor<float>({1, 2, 3, 4}, Shape{4});
  t2 = tensor<float>({1, 2, 3, 4}, Shape{1, 4});
  EXPECT_EQ(set_buffer_donation(t0, true), true);
  t4 = t0.add(-1.5);
  t2.masked_fill_(t4.gt(0), -1.5);
  mark_step();
  EXPECT_TRUE(donated_in_place(t2)) << last_step().to_string();
  EXPECT_EQ(last_step().num_donated, 2) << last_step().to_string();
  EXPECT_EQ(last_step().bytes_allocated, 0) << last_step().to_string();
  EXPECT_TRUE(is_donated(t0));
  expect_values(t2.to_vector<double>(), {1, -1.5, -1.5, -1.5});
  expect_values(t4.to_vector<double>(), {-0.5, 0.5, 1.5, 2.5});
}

// The same bug through copy_: x's new value reads the flagged t first, so t's buffer takes x's
// output; x's own buffer (rule 1: must be donated) is freed instead, and y's output is a fresh
// 16-byte allocation that t's buffer could have served.
TEST(FuzzRegression, UserDonationTakesTheOutputOfAnInPlaceTensorViaCopy) {
  LAZYX_FUZZ_PRELUDE("reference");
  Tensor x = tensor<float>({1, 2, 3, 4}, {4});
  Tensor t = tensor<float>({10, 20, 30, 40}, {4});
  Tensor y = t * 2;
  ASSERT_TRUE(set_buffer_donation(t, true));
  x.copy_(t + x);
  mark_step();
  EXPECT_TRUE(donated_in_place(x)) << last_step().to_string();
  EXPECT_EQ(last_step().bytes_allocated, 0) << last_step().to_string();
  expect_values(x.to_vector<double>(), {11, 22, 33, 44});
  expect_values(y.to_vector<double>(), {20, 40, 60, 80});
}

// lazyx-fuzz --seed 7 --case 4 --min-len 14 --max-len 18: scalar tensors updated in place,
// expanded views (in-place writes into them must fail), copy_ of a value computed from itself.
TEST(FuzzRegression, Seed7Case4) {
  LAZYX_FUZZ_PRELUDE("reference");
  Tensor t0, t1, t2, t3, t4, t5;
  t5 = tensor<float>({-0.75}, Shape{});
  t4 = tensor<float>({0.5, 0, 0.5, -2, 0, -0.5, 2, -0.25}, Shape{2, 4});
  t1 = tensor<float>({-2, 2, 0, 1, 1.75, 0.5, 2, 0.5, 0, -0.25, -1, 0.75, 0, -0.5, 0.5, 1.25}, Shape{16});
  t5.sub_(-0.5);
  t2 = t1.expand({2, 16});
  t4.copy_(minimum(t4, t4));
  EXPECT_THROW(t2.view({4, 1, 8}), lazyx::Error);
  t2 = t2.slice(1, 8, 13, 2);
  mark_step();
  EXPECT_TRUE(donated_in_place(t4));
  EXPECT_TRUE(donated_in_place(t5));
  expect_values(t1.to_vector<double>(), {-2, 2, 0, 1, 1.75, 0.5, 2, 0.5, 0, -0.25, -1, 0.75, 0, -0.5, 0.5, 1.25});
  expect_values(t2.to_vector<double>(), {0, -1, 0, 0, -1, 0});
  expect_values(t4.to_vector<double>(), {0.5, 0, 0.5, -2, 0, -0.5, 2, -0.25});
  expect_values(t5.to_vector<double>(), {-0.25});
  t5.sin_();
  t0 = minimum(t5, t4);
  EXPECT_THROW(t2.div_(-1.0), lazyx::Error);
  t3 = tensor<float>({1.25, -0.75, 1, 1.25, -1, -1.75, 2, -0.25, 0.75, 2, -1.5, 0, -1.75, 0.75, 2, 0}, Shape{2, 8});
  t5 = t4.clone();
  t5 = arange(0, 12, 1, kFloat32).reshape({3, 4});
  t5 = tensor<float>({2, -1.75, 0.5, 1.5, 0.75, -0.75, 1.25, -1.25, 1.5, 0.25, -1.25, 2, -1.5, 0.5, -0.75, 2}, Shape{2, 2, 4});
  mark_step();
  expect_values(t0.to_vector<double>(), {-0.247403964, -0.247403964, -0.247403964, -2, -0.247403964, -0.5, -0.247403964, -0.25});
  expect_values(t1.to_vector<double>(), {-2, 2, 0, 1, 1.75, 0.5, 2, 0.5, 0, -0.25, -1, 0.75, 0, -0.5, 0.5, 1.25});
  expect_values(t2.to_vector<double>(), {0, -1, 0, 0, -1, 0});
  expect_values(t3.to_vector<double>(), {1.25, -0.75, 1, 1.25, -1, -1.75, 2, -0.25, 0.75, 2, -1.5, 0, -1.75, 0.75, 2, 0});
  expect_values(t4.to_vector<double>(), {0.5, 0, 0.5, -2, 0, -0.5, 2, -0.25});
  expect_values(t5.to_vector<double>(), {2, -1.75, 0.5, 1.5, 0.75, -0.75, 1.25, -1.25, 1.5, 0.25, -1.25, 2, -1.5, 0.5, -0.75, 2});
}

// lazyx-fuzz --seed 7 --case 7 --min-len 14 --max-len 18: clones, dropped handles, dtype
// conversion, and donation across two steps.
TEST(FuzzRegression, Seed7Case7) {
  LAZYX_FUZZ_PRELUDE("reference");
  Tensor t0, t1, t2, t3, t4, t5;
  t1 = tensor<float>({0.75, -1.25, 1.5, -1}, Shape{4, 1});
  t3 = tensor<float>({1.25, 2, 0, -1.25, -2, 1.75, 0.5, 1.5, -0.25, 0.75, -2, -0.5, -2, -1.75, -0.5, -1.25}, Shape{4, 4});
  t5 = tensor<float>({-0.25, -1.5, -2, 0.5, 0, -0.25, 1, 2, 0.75, 0, -0.25, -1.5, 0, 2, 1.75, 2}, Shape{16});
  t3.add_(t1, -0.5);
  t0 = t5.clone();
  t0 = arange(0, 16, 1, kFloat32).reshape({2, 2, 4});
  t2 = tensor<float>({1.5, 1, -1, -1, -1.75, 1.75, -1, -1.25, -1.25, -1.75, 2, 0, -0.75, 1.25, 1.5, -0.25}, Shape{4, 4});
  mark_step();
  EXPECT_TRUE(donated_in_place(t3));
  expect_values(t0.to_vector<double>(), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  expect_values(t1.to_vector<double>(), {0.75, -1.25, 1.5, -1});
  expect_values(t2.to_vector<double>(), {1.5, 1, -1, -1, -1.75, 1.75, -1, -1.25, -1.25, -1.75, 2, 0, -0.75, 1.25, 1.5, -0.25});
  expect_values(t3.to_vector<double>(), {0.875, 1.625, -0.375, -1.625, -1.375, 2.375, 1.125, 2.125, -1, 0, -2.75, -1.25, -1.5, -1.25, 0, -0.75});
  expect_values(t5.to_vector<double>(), {-0.25, -1.5, -2, 0.5, 0, -0.25, 1, 2, 0.75, 0, -0.25, -1.5, 0, 2, 1.75, 2});
  t4 = t2.to(kFloat64);
  t2.sigmoid_();
  t5.add_(t5);
  t0 = arange(0, 4, 1, kFloat32).reshape({1, 4});
  t1 = Tensor();
  t4 = t3.index_select(0, tensor<int64_t>({0}));
  mark_step();
  EXPECT_TRUE(donated_in_place(t2));
  EXPECT_TRUE(donated_in_place(t5));
  expect_values(t0.to_vector<double>(), {0, 1, 2, 3});
  expect_values(t2.to_vector<double>(), {0.817574501, 0.731058598, 0.268941432, 0.268941432, 0.148047194, 0.851952791, 0.268941432, 0.222700134, 0.222700134, 0.148047194, 0.880797088, 0.5, 0.320821315, 0.777299881, 0.817574501, 0.437823504});
  expect_values(t3.to_vector<double>(), {0.875, 1.625, -0.375, -1.625, -1.375, 2.375, 1.125, 2.125, -1, 0, -2.75, -1.25, -1.5, -1.25, 0, -0.75});
  expect_values(t4.to_vector<double>(), {0.875, 1.625, -0.375, -1.625});
  expect_values(t5.to_vector<double>(), {-0.5, -3, -4, 1, 0, -0.5, 2, 4, 1.5, 0, -0.5, -3, 0, 4, 3.5, 4});
}

// Hand-written from the fuzzer's patterns: a user-donated buffer read by a view-derived tensor
// outside a partial sync stays intact (rule 3 with rule 1b), then goes at the next read.
TEST(FuzzRegression, UserDonationWithReadersOutsideThePartialSync) {
  LAZYX_FUZZ_PRELUDE("reference");
  Tensor t0 = tensor<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor t1 = t0.select(0, 1);      // a view of t0
  Tensor t2 = t1.expand({2, 3}) * 10;  // reads t0's buffer through the view; t0's byte size
  Tensor t3 = t0.t().sum({0});      // also reads it
  EXPECT_EQ(set_buffer_donation(t1, true), false);  // a view has no buffer of its own
  EXPECT_EQ(set_buffer_donation(t0, true), true);
  sync({t3});
  EXPECT_FALSE(is_donated(t0));     // t2 still reads it
  expect_values(t3.to_vector<double>(), {6, 15});
  expect_values(t2.to_vector<double>(), {40, 50, 60, 40, 50, 60});
  EXPECT_TRUE(is_donated(t0));      // the read of t2 was the last reader: it took the buffer
  EXPECT_THROW(t1.to_vector<double>(), lazyx::Error);
  EXPECT_THROW(t0.add_(1), lazyx::Error);
  mark_step();
  expect_values(t2.to_vector<double>(), {40, 50, 60, 40, 50, 60});
}

TEST(FuzzRegression, Seed77Case484) {
  using namespace lazyx;
  // Found on the cpu backend.
  for (const std::string& backend : backend_names()) {
    SCOPED_TRACE(backend);
    set_backend(backend);
    mark_step();
    clear_program_cache();
    auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want) {
      ASSERT_EQ(got.size(), want.size());
      double scale = 0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-3 + 1e-4 * std::fabs(want[i]) + 1e-5 * scale)
            << "element " << i;
      }
    };
    auto donated_in_place = [](const Tensor& t) {
      StepReport r = last_step();
      for (const auto& p : r.params) {
        if (p.donated && p.reason == AliasReason::InPlaceUpdate &&
            p.output_tensor_id == t.impl()->storage()->id())
          return true;
      }
      return false;
    };
    (void)expect_values;
    (void)donated_in_place;
    Tensor t0, t1, t2, t3, t4, t5;
    t3 = arange(0, 16, 1, kFloat32).reshape({4, 4});
    mark_step();
    expect_values(t3.to_vector<double>(), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
    t4 = t3.cos();
    t3.fill_(-1.5);
    t3.sub_(t4);
    mark_step();
    EXPECT_TRUE(donated_in_place(t3));
    expect_values(t3.to_vector<double>(),
                  {-2.5, -2.04030228, -1.08385313, -0.510007501, -0.846356392, -1.7836622,
                   -2.46017027, -2.2539022, -1.35449994, -0.58886975, -0.660928488, -1.50442564,
                   -2.34385395, -2.40744686, -1.63673723, -0.740312099});
  }
}

// Two in-place updates through a transposed view, with the first update's value read by
// another donated output: the reference backend's in-place chain must not overwrite it.
TEST(FuzzRegression, Seed14Case197_reference) {
  using namespace lazyx;
  // Found on the reference backend.
  for (const std::string& backend : backend_names()) {
    SCOPED_TRACE(backend);
    set_backend(backend);
    mark_step();
    clear_program_cache();
    auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want) {
      ASSERT_EQ(got.size(), want.size());
      double scale = 0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-3 + 1e-4 * std::fabs(want[i]) + 1e-5 * scale)
            << "element " << i;
      }
    };
    auto donated_in_place = [](const Tensor& t) {
      StepReport r = last_step();
      for (const auto& p : r.params) {
        if (p.donated && p.reason == AliasReason::InPlaceUpdate &&
            p.output_tensor_id == t.impl()->storage()->id())
          return true;
      }
      return false;
    };
    (void)expect_values;
    (void)donated_in_place;
    Tensor t0, t1, t2, t3, t4, t5;
    t0 = tensor<float>({1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2}, Shape{3, 4});
    t1 = t0.transpose(1, 0);
    t2 = t1.slice(0, 2, 3, 1);
    t2.masked_fill_(t2.gt(0), -0.75);
    t3 = tensor<float>({1, 2, 3, 4}, Shape{4, 1});
    t5 = t2.div(t2.abs().add(1));
    t0 = tensor<float>({1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2}, Shape{4, 3});
    t0.copy_(matmul(t3, t2).sub(t0));
    t1.mul_(t5);
    t1.sub_(0.75);
    mark_step();
    EXPECT_TRUE(donated_in_place(t0));
    EXPECT_TRUE(donated_in_place(t1));
    expect_values(t0.to_vector<double>(),
                  {-1.75, -2.75, -3.75, -5.5, -6.5, -2.5, -4.25, -5.25, -6.25, -8, -4, -5});
  }
}

// A donated [1] parameter read by a loop over [] (a 0-d sum's group): the planner's identity
// check indexed past the output's dims and crashed (cpu backend).
// lazyx-fuzz --seed 3 --case 816 --backend cpu
TEST(FuzzRegression, Seed3Case816_cpu) {
  using namespace lazyx;
  // Found on the cpu backend.
  for (const std::string& backend : backend_names()) {
    SCOPED_TRACE(backend);
    set_backend(backend);
    mark_step();
    clear_program_cache();
    auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want) {
      ASSERT_EQ(got.size(), want.size());
      double scale = 0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-3 + 1e-4 * std::fabs(want[i]) + 1e-5 * scale) << "element " << i;
      }
    };
    auto donated_in_place = [](const Tensor& t) {
      StepReport r = last_step();
      for (const auto& p : r.params) {
        if (p.donated && p.reason == AliasReason::InPlaceUpdate &&
            p.output_tensor_id == t.impl()->storage()->id()) return true;
      }
      return false;
    };
    (void)expect_values;
    (void)donated_in_place;
    Tensor t0, t1, t2, t3, t4, t5;
    t4 = tensor<float>({-0.5, 0.5, 0.75, 1.25, -0.75, 0.5, 0.25, -1.75, 2, -0.75, -1, 0.25, -2, -0.25, -0.25, 0.75}, Shape{16});
    t3 = tensor<float>({1.75, -0.75, 1, -0.5, 1.75, 2, 1.25, -1.75, 1.75, -0.25, -1.75, 1.75, -1.5, 1.25, 2, -0.25}, Shape{2, 8});
    t4.sub_(t4, -2.0);
    EXPECT_EQ(set_buffer_donation(t3, false), false);
    t4 = Tensor();
    t4 = tensor<float>({0.25, -1.75, -1.25, 1, -0.75, -1.25, 0.75, -2, 1.25, 0, 0.75, 0.75, 1.25, 0.25, -0.5, -0.75}, Shape{16});
    t4 = t4.unsqueeze(1);
    t3 = t3.index_select(1, tensor<int64_t>({7}));
    t3 = Tensor();
    t3 = tensor<float>({-1.25, -1.75, 0.25, -1.5}, Shape{4, 1});
    t3.exp_();
    t4 = t4.amax({0}, false);
    t3.abs_().sqrt_();
    t1 = t4.sub(t3);
    t1 = t1.slice(0, 1, 4, 2);
    t2 = tensor<float>({-0.75, -1.5, -0.75, -1.75, -2, 0.25, -1, -1.75}, Shape{2, 4});
    t0 = t2.add(t1, -2.0);
    t2 = scalar_tensor(-2.0, kFloat32);
    t3 = t0.mean({0, 1}, true);
    sync({t0, t1, t4});
    t1.sub_(-0.25);
    t5 = scalar_tensor(-1.5, kFloat32);
    t2 = t4.select(0, 0);
    mark_step();
    EXPECT_TRUE(donated_in_place(t1));
    expect_values(t0.to_vector<double>(), {-2.41627598, -3.16627598, -2.41627598, -3.41627598, -3.55526686, -1.30526686, -2.55526686, -3.30526686});
    expect_values(t1.to_vector<double>(), {1.08313799, 1.02763343});
    expect_values(t2.to_vector<double>(), {1.25});
    expect_values(t3.to_vector<double>(), {-2.76702142});
    expect_values(t4.to_vector<double>(), {1.25});
    expect_values(t5.to_vector<double>(), {-1.5});
    t2 = t0.view({1, 8, 1});
    t2 = t1.softmax(0);
    t0.copy_(t1);
    t5.mul_(-0.5);
    t0 = t1.index_select(0, tensor<int64_t>({1, 0, 0}));
    t5.masked_fill_(t5.gt(0), -0.5);
    t0 = t0.select(1, 0);
    EXPECT_EQ(set_buffer_donation(t4, true), true);
    t2 = tensor<float>({0.75, 1.5, 1, 1.25}, Shape{4});
    t3 = Tensor();
    t0.copy_(maximum(t0, t0));
    t3 = t4.add(t5, -2.0);
    sync({t0, t1, t2, t3, t4});
    t5.sin_();
    mark_step();
    EXPECT_TRUE(donated_in_place(t5));
    expect_values(t0.to_vector<double>(), {1.02763343, 1.08313799, 1.08313799});
    expect_values(t1.to_vector<double>(), {1.08313799, 1.02763343});
    expect_values(t2.to_vector<double>(), {0.75, 1.5, 1, 1.25});
    expect_values(t3.to_vector<double>(), {2.25});
    expect_values(t5.to_vector<double>(), {-0.47942555});
    t0 = t0.reshape({3, 1, 1});
    t3 = t5.expand({3});
    EXPECT_THROW(t4.masked_fill_(t4.gt(0), -0.5), lazyx::Error);
    expect_values(std::vector<double>{t5.item<double>()}, {-0.47942555});
    EXPECT_THROW(t4.to_vector<double>(), lazyx::Error);
    t4 = t2.select(0, 0);
    EXPECT_THROW(t3.add_(t3), lazyx::Error);
    t5 = t0.gelu();
    t1.exp_();
    t3 = t2.to(kFloat32);
    t5 = t0.sum({}, false);
    t5.neg_().add_(-1.0);
    t0 = t4.mul(t1);
    t1.sub_(-1.5);
    t1.copy_(t0);
    t0.copy_(t0);
    t0.div_(-1.0);
    mark_step();
    EXPECT_TRUE(donated_in_place(t1));
    expect_values(t0.to_vector<double>(), {-2.21545076, -2.09583354});
    expect_values(t1.to_vector<double>(), {2.21545076, 2.09583354});
    expect_values(t2.to_vector<double>(), {0.75, 1.5, 1, 1.25});
    expect_values(t3.to_vector<double>(), {0.75, 1.5, 1, 1.25});
    expect_values(t4.to_vector<double>(), {0.75});
    expect_values(t5.to_vector<double>(), {-4.19390965});
  }
}
