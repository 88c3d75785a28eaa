// A failed step changes nothing, on every backend, even when memory runs out in the middle of
// it: every allocation a run needs happens before any donated buffer is written. Allocation
// failures are injected at each allocation of an optimizer-like step in turn.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"
#include "runtime/allocator.h"

using namespace lazyx;

namespace {

constexpr int64_t kN = 64;

std::vector<float> host(float start, float step) {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = start + step * static_cast<float>(i % 13);
  return v;
}

struct Model {
  Tensor p1, p2, m, g1, g2, frozen;
  Model()
      : p1(tensor<float>(host(1, 0.5f), {kN})),
        p2(tensor<float>(host(-2, 0.25f), {kN})),
        m(tensor<float>(host(0, 0.1f), {kN})),
        g1(tensor<float>(host(0.5f, -0.05f), {kN})),
        g2(tensor<float>(host(-0.3f, 0.02f), {kN})),
        frozen(tensor<float>(host(3, 1), {kN})) {}

  // One step: several in-place updates with intermediates, a view update and a fresh output.
  Tensor trace() {
    m.mul_(0.9).add_(g1 * g1, 0.1);
    p1.add_(g1 / (m.sqrt() + 1), -0.5);
    p2.add_(g2.exp() * frozen, -0.25);
    p2.narrow(0, 8, 16).mul_(2);
    return p1 * p2 + m;
  }
};

// Host versions of the same step.
struct Expected {
  std::vector<float> p1, p2, m, out;
};

Expected expected() {
  Expected e{host(1, 0.5f), host(-2, 0.25f), host(0, 0.1f), {}};
  std::vector<float> g1 = host(0.5f, -0.05f), g2 = host(-0.3f, 0.02f), fr = host(3, 1);
  for (int64_t i = 0; i < kN; ++i) {
    e.m[i] = e.m[i] * 0.9f + 0.1f * g1[i] * g1[i];
    e.p1[i] += -0.5f * (g1[i] / (std::sqrt(e.m[i]) + 1));
    e.p2[i] += -0.25f * (std::exp(g2[i]) * fr[i]);
    if (i >= 8 && i < 24) e.p2[i] *= 2;
    e.out.push_back(e.p1[i] * e.p2[i] + e.m[i]);
  }
  return e;
}

void expect_near(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * std::max(1.0f, std::fabs(want[i]))) << what << " at " << i;
  }
}

class FailedSteps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
  }
  void TearDown() override { runtime::fail_allocation_after(-1); }
};

TEST_P(FailedSteps, AllocationFailureAtEveryPointChangesNothing) {
  const Expected want = expected();
  {  // compile once, so the sweep below runs the cached program
    Model warm;
    Tensor out = warm.trace();
    Tensor out2 = out * 2;
    mark_step();
    expect_near(out, want.out, "warm-up");
  }
  int failures = 0;
  bool succeeded = false;
  for (int64_t n = 0; n < 200 && !succeeded; ++n) {
    Model md;
    Tensor out = md.trace();
    Tensor out2 = out * 2;  // a second fresh output: the updates themselves allocate nothing
    runtime::fail_allocation_after(n);
    try {
      mark_step();
      succeeded = true;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
      failures++;
    }
    runtime::fail_allocation_after(-1);
    if (!succeeded) {
      // Nothing changed: the inputs still read as before, and the same pending step now
      // succeeds from the untouched buffers.
      expect_near(md.frozen, host(3, 1), "frozen after failure " + std::to_string(n));
      expect_near(md.g1, host(0.5f, -0.05f), "g1 after failure " + std::to_string(n));
      mark_step();
    }
    expect_near(md.p1, want.p1, "p1 at n=" + std::to_string(n));
    expect_near(md.p2, want.p2, "p2 at n=" + std::to_string(n));
    expect_near(md.m, want.m, "m at n=" + std::to_string(n));
    expect_near(out, want.out, "out at n=" + std::to_string(n));
    std::vector<float> twice(want.out);
    for (float& v : twice) v *= 2;
    expect_near(out2, twice, "out2 at n=" + std::to_string(n));
  }
  EXPECT_TRUE(succeeded);
  EXPECT_GT(failures, 1);  // the step allocates several buffers; each failure point was tried
}

TEST_P(FailedSteps, FailedUploadChangesNothing) {
  Tensor a = tensor<float>(host(1, 1), {kN});
  mark_step();
  runtime::fail_allocation_after(0);
  EXPECT_THROW(tensor<float>(host(5, 1), {kN}), Error);
  runtime::fail_allocation_after(-1);
  expect_near(a, host(1, 1), "a");
}

INSTANTIATE_TEST_SUITE_P(Backends, FailedSteps, ::testing::ValuesIn(backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
