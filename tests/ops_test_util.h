// Helpers shared by the op test files (tests/test_ops_*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lazyx/lazyx.h"

namespace lazyx_ops_test {

using lazyx::Dtype;
using lazyx::kBFloat16;
using lazyx::kBool;
using lazyx::kFloat16;
using lazyx::kFloat32;
using lazyx::kFloat64;
using lazyx::kInt32;
using lazyx::kInt64;
using lazyx::Shape;
using lazyx::Tensor;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

#define EXPECT_DTYPE(t, d)                                                             \
  EXPECT_EQ((t).dtype(), (d)) << "got " << lazyx::dtype_name((t).dtype()) << ", want " \
                              << lazyx::dtype_name(d)

// Relative tolerance ~1e-5 (float32), with a small absolute floor for values near zero.
inline void ExpectFloats(const Tensor& t, const std::vector<float>& want, double rel = 1e-5) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": got " << got[i] << ", want nan";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-6 + rel * std::abs(want[i])) << "at " << i;
    }
  }
}

inline void ExpectInts(const Tensor& t, const std::vector<int64_t>& want) {
  EXPECT_EQ(t.to_vector<int64_t>(), want);
}

inline void ExpectBools(const Tensor& t, const std::vector<bool>& want) {
  EXPECT_EQ(t.to_vector<bool>(), want);
}

// Builds the same graph twice: once read directly (a partial sync of the value read), once run
// by mark_step() and read after it (and again after a second, empty step).
template <typename Make, typename Check>
void BeforeAndAfterStep(Make make, Check check) {
  {
    SCOPED_TRACE("read without mark_step");
    Tensor r = make();
    check(r);
  }
  {
    SCOPED_TRACE("read after mark_step");
    Tensor r = make();
    lazyx::mark_step();
    EXPECT_FALSE(r.is_pending());
    check(r);
    lazyx::mark_step();
    check(r);
  }
}

inline Tensor F32(const std::vector<float>& v, const Shape& s) {
  return lazyx::tensor<float>(v, s);
}
inline Tensor F32(const std::vector<float>& v) { return lazyx::tensor<float>(v); }
inline Tensor I64(const std::vector<int64_t>& v, const Shape& s) {
  return lazyx::tensor<int64_t>(v, s);
}
inline Tensor I64(const std::vector<int64_t>& v) { return lazyx::tensor<int64_t>(v); }

// 0, 1, ..., n-1 as float32 in shape `s`.
inline Tensor Iota(int n, const Shape& s) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return F32(v, s);
}

inline int64_t UncachedCompiles() {
  return lazyx::metrics::counter_value("UncachedCompile").value_or(0);
}

}  // namespace lazyx_ops_test
