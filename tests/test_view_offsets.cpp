// Windows into materialized buffers read at run-time offsets: the same shapes at another offset
// hit the program cache, on every backend, with values checked against host arithmetic.
#include <cmath>
#include <cstdlib>

#include "test_util.h"

namespace lazyx {
namespace {

using testing::counter;
using testing::expect_floats;
using testing::iota;
using testing::materialized;

class ViewOffsets : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    clear_program_cache();
    metrics::clear_all();
  }
  void TearDown() override { set_backend("reference"); }
};

// The word-language-model pattern: the corpus is uploaded once, each step reads a window.
TEST_P(ViewOffsets, MovingSliceCompilesOnce) {
  Tensor src = materialized(iota(1000), {1000});
  for (int64_t i = 0; i < 6; ++i) {
    Tensor y = (src.slice(0, i * 10, (i + 1) * 10) * 2).sum();
    mark_step();
    float want = 0;
    for (int64_t k = i * 10; k < (i + 1) * 10; ++k) want += 2.0f * static_cast<float>(k);
    expect_floats(y, {want});
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
  EXPECT_EQ(counter("CachedCompile"), 5);
}

// Rows, 2-D windows, strided and chained views, and a window as a matmul operand.
TEST_P(ViewOffsets, SelectNarrowChainsAndMatmul) {
  Tensor table = materialized(iota(64 * 8, 0, 0.01f), {64, 8});
  Tensor w = materialized(iota(8 * 3, -1, 0.1f), {8, 3});
  std::vector<float> hw = w.to_vector<float>(), ht = table.to_vector<float>();
  for (int64_t i = 0; i < 5; ++i) {
    Tensor row = table.select(0, 3 * i + 1);                   // [8]
    Tensor win = table.narrow(0, 2 * i, 4).slice(1, 1, 7, 2);  // [4, 3], chained
    Tensor prod = table.narrow(0, 7 * i, 2).matmul(w);         // [2, 3]
    Tensor a = row * 3 + 1, b = win.exp(), c = prod;
    mark_step();
    std::vector<float> wa, wb, wc(6, 0);
    for (int64_t k = 0; k < 8; ++k) wa.push_back(ht[(3 * i + 1) * 8 + k] * 3 + 1);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t k = 1; k < 7; k += 2) wb.push_back(std::exp(ht[(2 * i + r) * 8 + k]));
    }
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t j = 0; j < 3; ++j) {
        for (int64_t k = 0; k < 8; ++k) wc[r * 3 + j] += ht[(7 * i + r) * 8 + k] * hw[k * 3 + j];
      }
    }
    expect_floats(a, wa);
    expect_floats(b, wb, 1e-4f);
    expect_floats(c, wc, 1e-4f);
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

// Two windows of one buffer and the whole buffer in one program: three reads, one buffer.
TEST_P(ViewOffsets, SeveralWindowsOfOneBuffer) {
  Tensor src = materialized(iota(100), {100});
  for (int64_t i = 0; i < 4; ++i) {
    Tensor y = src.slice(0, i, i + 5) + src.slice(0, 50 + 2 * i, 55 + 2 * i) + src.sum();
    mark_step();
    std::vector<float> want;
    for (int64_t k = 0; k < 5; ++k) want.push_back(static_cast<float>(i + k + 50 + 2 * i + k) + 4950);
    expect_floats(y, want);
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

// A buffer both read through a window and updated in place (donated) in the same step: the
// window's offset goes back into the graph, so the backend orders the read before the write.
TEST_P(ViewOffsets, WindowOfDonatedBufferStaysCorrect) {
  Tensor x = materialized(iota(16), {16});
  std::vector<float> hx = x.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i) {
    Tensor y = x.slice(0, i + 1, i + 9) * 10;  // reads the old values
    x.mul_(2);
    mark_step();
    std::vector<float> want;
    for (int64_t k = 0; k < 8; ++k) want.push_back(hx[i + 1 + k] * 10);
    for (auto& v : hx) v *= 2;
    expect_floats(y, want);
    expect_floats(x, hx);
    EXPECT_EQ(last_step().num_donated, 1);
  }
}

// Partial syncs and value reads take windows at run-time offsets too.
TEST_P(ViewOffsets, ValueReadsShareOnePrograms) {
  Tensor src = materialized(iota(200, 1), {200});
  for (int64_t i = 0; i < 5; ++i) {
    float got = src.narrow(0, 20 * i, 20).amax({0}).item<float>();
    EXPECT_EQ(got, static_cast<float>(20 * i + 20));
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

// Other per-batch values are operands already: arange's start and step, host-built indices.
TEST_P(ViewOffsets, ArangeStartsAndHostIndicesShareOneProgram) {
  Tensor table = materialized(iota(40, 0, 0.5f), {20, 2});
  for (int64_t i = 0; i < 4; ++i) {
    Tensor r = arange(Scalar(i * 10), Scalar(i * 10 + 5), Scalar(1)) * 2;
    Tensor rows = table.index_select(0, tensor<int64_t>({3 * i, 3 * i + 1}, {2}));
    mark_step();
    std::vector<int64_t> got = r.to_vector<int64_t>(), want;
    for (int64_t k = 0; k < 5; ++k) want.push_back(2 * (i * 10 + k));
    EXPECT_EQ(got, want);
    expect_floats(rows, {3 * i * 1.0f, 3 * i * 1.0f + 0.5f, 3 * i + 1.0f, 3 * i + 1.5f});
  }
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

// LAZYX_STATIC_VIEW_OFFSETS=1 bakes offsets into the graph: one program per offset.
TEST_P(ViewOffsets, StaticOffsetsSwitchCompilesEach) {
  setenv("LAZYX_STATIC_VIEW_OFFSETS", "1", 1);
  Tensor src = materialized(iota(100), {100});
  for (int64_t i = 0; i < 3; ++i) {
    Tensor y = src.slice(0, i, i + 4) + 1;
    mark_step();
    expect_floats(y, {static_cast<float>(i + 1), static_cast<float>(i + 2),
                      static_cast<float>(i + 3), static_cast<float>(i + 4)});
  }
  EXPECT_EQ(counter("UncachedCompile"), 3);
  setenv("LAZYX_STATIC_VIEW_OFFSETS", "maybe", 1);
  testing::expect_error([&] { (void)(src.slice(0, 1, 3) + 1); },
                        {"LAZYX_STATIC_VIEW_OFFSETS", "'maybe'"});
  unsetenv("LAZYX_STATIC_VIEW_OFFSETS");
}

// Bounds stay checked: a window past the buffer's end raises when it is made, so a program
// never receives an offset that reads outside its parameter.
TEST_P(ViewOffsets, WindowsPastTheEndRaise) {
  Tensor src = materialized(iota(100), {100});
  testing::expect_error([&] { (void)src.narrow(0, 95, 10); }, {"narrow"});
  testing::expect_error([&] { (void)src.as_strided({3}, {2}, 96); }, {"as_strided"});
  Tensor y = src.narrow(0, 90, 10) + 1;  // the last valid window still runs
  mark_step();
  expect_floats(y, {91, 92, 93, 94, 95, 96, 97, 98, 99, 100});
}

std::vector<std::string> all_backends() { return backend_names(); }

INSTANTIATE_TEST_SUITE_P(Backends, ViewOffsets, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lazyx
