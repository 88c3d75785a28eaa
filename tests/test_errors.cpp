// Bad input raises lazyx::Error naming the op and the problem, and changes nothing.
#include "test_util.h"

namespace lazyx {
namespace {

using testing::expect_error;
using testing::expect_floats;
using testing::materialized;

class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    set_backend("reference");
    set_backend_alive(true);
    mark_step();
  }
};

TEST_F(Errors, ShapeMismatch) {
  Tensor a = materialized(testing::iota(6), {2, 3});
  Tensor b = materialized({1, 2, 3, 4}, {4});
  expect_error([&] { (void)(a + b); }, {"[add]", "[2, 3]", "[4]", "cannot be broadcast"});
  expect_error([&] { (void)a.matmul(a); }, {"[matmul]", "cannot be multiplied", "2x3", "2x3"});
  expect_error([&] { (void)a.view({4}); }, {"[view]", "[4]", "invalid for input of size 6"});
  expect_error([&] { (void)cat({a, b}, 0); }, {"[cat]", "ranks differ"});
  expect_error([&] { (void)a.sum({2}); }, {"[sum]", "dimension 2 is out of range"});
  expect_floats(a, testing::iota(6));
}

TEST_F(Errors, UnsupportedDtype) {
  Tensor i = tensor<int64_t>({1, 2, 3});
  expect_error([&] { (void)i.mean(); }, {"[mean]", "int64", "not floating point"});
  Tensor bl = tensor<bool>({true, false});
  expect_error([&] { (void)bl.matmul(bl); }, {"[matmul]", "bool"});
  expect_error([&] { (void)i.matmul(materialized({1, 2, 3}, {3})); },
               {"[matmul]", "int64", "float32"});
  expect_error([&] { (void)where(i, i, i); }, {"[where]", "condition must be bool"});
  expect_error([&] { (void)bl.sub(bl); }, {"[sub]", "bool"});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(Errors, IndexOutOfRange) {
  Tensor x = materialized(testing::iota(6), {3, 2});
  expect_error([&] { (void)x.select(0, 3); }, {"[select]", "index 3", "size 3"});
  expect_error([&] { (void)x.select(2, 0); }, {"[select]", "dimension 2"});
  expect_error([&] { (void)x.narrow(1, 1, 2); }, {"[narrow]", "exceed"});
  Tensor idx = tensor<int64_t>({0, 5});  // known at trace time
  expect_error([&] { (void)x.index_select(0, idx); }, {"[index_select]", "index 5", "size 3"});
  Tensor src = materialized({9, 9, 9, 9}, {2, 2});
  expect_error([&] { x.index_copy_(0, idx, src); }, {"[index_copy_]", "index 5"});
  expect_floats(x, testing::iota(6));
}

TEST_F(Errors, IndexOutOfRangeFoundAtRunTimeChangesNothing) {
  Tensor x = materialized(testing::iota(6), {3, 2});
  Tensor w = materialized({1, 2}, {2});
  w.add_(1);  // pending, would be donated
  Tensor idx = tensor<int64_t>({0, 1}) * 3;  // computed lazily: [0, 3]
  Tensor bad = x.index_select(0, idx);
  expect_error([&] { mark_step(); }, {"[index_select]", "index 3", "size 3", "nothing was changed"});
  EXPECT_TRUE(w.is_pending());
  bad = Tensor();
  idx = Tensor();
  mark_step();
  expect_floats(w, {2, 3});
  expect_floats(x, testing::iota(6));
}

TEST_F(Errors, InPlaceMayNotChangeShapeOrDtype) {
  Tensor x = materialized({1, 2, 3}, {3, 1});
  Tensor y = materialized(testing::iota(12), {3, 4});
  expect_error([&] { x.add_(y); }, {"[add_]", "would change the tensor's shape", "[3, 1]", "[3, 4]"});
  Tensor i = tensor<int64_t>({1, 2});
  expect_error([&] { i.mul_(0.5); }, {"[mul_]", "float32", "can't be cast", "int64"});
  expect_error([&] { i.exp_(); }, {"[exp_]", "can't be cast"});
  Tensor e = x.expand({3, 4});
  expect_error([&] { e.add_(1); }, {"[add_]", "expanded view"});
  expect_floats(x, {1, 2, 3});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST_F(Errors, ReadingADonatedTensor) {
  Tensor t = materialized({1, 2}, {2});
  Tensor y = t + 1;
  ASSERT_TRUE(set_buffer_donation(t, true));
  mark_step();
  ASSERT_TRUE(is_donated(t));
  expect_error([&] { t.item<float>(); }, {"[item]"});
  expect_error([&] { t.to_vector<float>(); }, {"[to_vector]", "donated", "set_buffer_donation"});
  expect_error([&] { (void)t.relu(); }, {"[relu]", "donated"});
  expect_error([&] { t.add_(1); }, {"[add_]", "donated"});
  expect_error([&] { (void)t.clone(); }, {"[clone]", "donated"});
  expect_error([&] { sync({t}); }, {"[sync]", "donated"});
  expect_floats(y, {2, 3});
}

TEST_F(Errors, DeadBackend) {
  Tensor x = materialized({1, 2}, {2});
  x.mul_(5);
  set_backend_alive(false);
  expect_error([&] { mark_step(); }, {"[mark_step]", "backend 'reference' is dead", "as it was"});
  expect_error([&] { x.to_vector<float>(); }, {"[read]", "dead"});
  expect_error([&] { (void)tensor<float>({1}); }, {"[tensor]", "dead"});
  EXPECT_TRUE(x.is_pending());
  set_backend_alive(true);
  mark_step();
  expect_floats(x, {5, 10});
}

TEST_F(Errors, UnknownBackend) {
  expect_error([&] { set_backend("tpu"); }, {"[backend]", "unknown backend 'tpu'", "reference"});
  EXPECT_EQ(backend_name(), "reference");
}

TEST_F(Errors, BadCreationArguments) {
  expect_error([&] { (void)tensor<float>({1, 2, 3}, {2, 2}); }, {"[tensor]", "3 values", "[2, 2]"});
  expect_error([&] { (void)zeros({-1, 2}); }, {"[full]", "negative dimension"});
  expect_error([&] { (void)zeros({1 << 30, 1 << 30}); }, {"[full]", "too many elements"});
  expect_error([&] { (void)randint(5, 5, {2}); }, {"[randint]", "greater than low"});
  expect_error([&] { (void)arange(0, 10, 0); }, {"[arange]", "step must be nonzero"});
  expect_error([&] { (void)Tensor().relu(); }, {"[relu]", "undefined tensor"});
  Tensor x = materialized({1, 2}, {2});
  expect_error([&] { x.item<float>(); }, {"[item]", "2 elements"});
}

}  // namespace
}  // namespace lazyx
