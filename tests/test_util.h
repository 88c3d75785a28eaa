// Shared helpers for the C++ tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lazyx/lazyx.h"

namespace lazyx::testing {

inline std::vector<float> iota(int64_t n, float start = 0, float step = 1) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// A tensor holding a buffer (as after a step), from host values.
inline Tensor materialized(const std::vector<float>& v, const Shape& shape) {
  return tensor<float>(v, shape);
}

inline int64_t counter(const std::string& name) {
  return metrics::counter_value(name).value_or(0);
}

inline double alias_accumulator() {
  auto d = metrics::metric_data("InputOutputAliasCount");
  return d ? d->accumulator : 0;
}

inline int64_t alias_samples() {
  auto d = metrics::metric_data("InputOutputAliasCount");
  return d ? d->total_samples : 0;
}

// Runs `f`, expects a lazyx::Error whose message contains every string in `parts`.
template <typename F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected lazyx::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
  }
}

inline void expect_floats(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

}  // namespace lazyx::testing
