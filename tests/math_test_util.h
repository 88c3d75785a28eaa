// Helpers shared by the math-op tests: the built backends, and closeness that checks NaN, the
// sign of infinities and of zeros.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

namespace lazyx::math_test {

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr double kNanD = std::numeric_limits<double>::quiet_NaN();

std::vector<std::string> backends() {
#ifdef LAZYX_TEST_HAVE_CPU
  return {"reference", "cpu"};
#else
  return {"reference"};
#endif
}

// Runs `body` once per backend (a fresh step each time).
void on_each_backend(const std::function<void()>& body) {
  for (const std::string& b : backends()) {
    SCOPED_TRACE("backend " + b);
    set_backend(b);
    body();
    mark_step();
  }
  set_backend(backends().back());
}

// got within rel (relative, with a 1e-300 floor) of want; NaN matches NaN, infinities by sign,
// and zeros by sign when want is a zero.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i << ": got " << got[i];
    } else if (std::isinf(want[i]) || want[i] == 0) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      if (want[i] == 0) {
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << " at " << i;
      }
    } else {
      EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-300) << what << " at " << i;
    }
  }
}

}  // namespace lazyx::math_test
