// Bad input to every public entry point: each case must raise lazyx::Error whose message names
// the op ("[op] ..."), and must leave every tensor as it was: materialized tensors keep their
// values, pending tensors stay pending (and later compute the right values), a donated tensor
// stays donated, and no buffer is left allocated.
#include <functional>

#include "test_util.h"

namespace lazyx {
namespace {

using testing::iota;

// The state each case starts from and must leave unchanged.
struct World {
  Tensor a = tensor<float>(iota(6), {2, 3});                 // materialized
  Tensor b = tensor<float>({1, 2, 3, 4}, {4});               // materialized
  Tensor p = a * 2;                                          // pending, reads a
  Tensor v = a.select(0, 1);                                 // a view of a
  Tensor w = tensor<float>({10, 20}, {2});                   // updated in place: pending,
  Tensor i64 = tensor<int64_t>({0, 1, 1});                   //   donated at the next step
  Tensor bl = tensor<bool>({true, false, true});
  Tensor gone = tensor<float>({7, 8}, {2});                  // donated below
  World() {
    w.add_(1);
    Tensor keep = gone + 1;
    EXPECT_TRUE(set_buffer_donation(gone, true));
    sync({keep});  // the next sync that reads `gone` takes its buffer
    EXPECT_TRUE(is_donated(gone));
  }
};

struct Case {
  const char* name;
  std::function<void(World&)> fn;
  const char* op;  // the message must start with "[op]"
  std::vector<std::string> parts;
};

std::vector<Case> cases() {
  std::vector<Case> c = {
      // Wrong shapes.
      {"add: shapes do not broadcast", [](World& w) { (void)(w.a + w.b); }, "add", {"[2, 3]", "[4]"}},
      {"mul_: in place would change the shape", [](World& w) { w.b.mul_(w.a.reshape({6, 1})); }, "mul_", {"shape"}},
      {"where: shapes do not broadcast", [](World& w) { (void)where(w.bl, w.a, w.b); }, "where", {}},
      {"maximum: shapes", [](World& w) { (void)maximum(w.a, w.b); }, "maximum", {}},
      {"matmul: inner dims differ", [](World& w) { (void)matmul(w.a, w.a); }, "matmul", {"cannot be multiplied"}},
      {"matmul: 0-d operand", [](World& w) { (void)matmul(w.a, scalar_tensor(1.0)); }, "matmul", {"at least 1 dimension"}},
      {"mm: 1-D operand", [](World& w) { (void)mm(w.b, w.b); }, "mm", {"2-D"}},
      {"bmm: 2-D operands", [](World& w) { (void)bmm(w.a, w.a); }, "bmm", {"3-D"}},
      {"addmm: input does not broadcast", [](World& w) { (void)addmm(w.b, w.a, w.a.t()); }, "addmm", {"broadcast"}},
      {"view: wrong numel", [](World& w) { (void)w.a.view({4}); }, "view", {"invalid for input of size 6"}},
      {"view: not viewable", [](World& w) { (void)w.a.t().view({6}); }, "view", {"reshape"}},
      {"reshape: wrong numel", [](World& w) { (void)w.a.reshape({5}); }, "reshape", {"size 6"}},
      {"reshape: two inferred dims", [](World& w) { (void)w.a.reshape({-1, -1}); }, "reshape", {"only one dimension"}},
      {"reshape: negative size", [](World& w) { (void)w.a.reshape({-2, 3}); }, "reshape", {"invalid size"}},
      {"expand: incompatible", [](World& w) { (void)w.a.expand({2, 4}); }, "expand", {"cannot expand"}},
      {"expand: fewer dims", [](World& w) { (void)w.a.expand({3}); }, "expand", {"fewer dimensions"}},
      {"permute: wrong count", [](World& w) { (void)w.a.permute({0}); }, "permute", {"expected 2 dims"}},
      {"permute: repeated dim", [](World& w) { (void)w.a.permute({1, 1}); }, "permute", {"repeats"}},
      {"transpose: dim out of range", [](World& w) { (void)w.a.transpose(0, 2); }, "transpose", {"out of range"}},
      {"squeeze: dim out of range", [](World& w) { (void)w.a.squeeze(5); }, "squeeze", {"out of range"}},
      {"unsqueeze: dim out of range", [](World& w) { (void)w.a.unsqueeze(4); }, "unsqueeze", {"out of range"}},
      {"flatten: start after end", [](World& w) { (void)w.a.flatten(1, 0); }, "flatten", {"start_dim"}},
      {"t: 3-D", [](World& w) { (void)w.a.reshape({1, 2, 3}).t(); }, "t", {"at most 2 dimensions"}},
      {"cat: empty list", [](World&) { (void)cat({}); }, "cat", {"non-empty"}},
      {"cat: ranks differ", [](World& w) { (void)cat({w.a, w.b}); }, "cat", {"ranks differ"}},
      {"cat: sizes differ", [](World& w) { (void)cat({w.a, w.a.t()}, 0); }, "cat", {"sizes must match"}},
      {"cat: 0-d", [](World&) { (void)cat({scalar_tensor(1.0)}); }, "cat", {"zero-dimensional"}},
      {"stack: shapes differ", [](World& w) { (void)stack({w.a, w.b}); }, "stack", {"same shape"}},
      {"copy_: source does not broadcast", [](World& w) { w.b.copy_(w.a); }, "copy_", {"cannot be broadcast"}},
      {"masked_fill: mask widens the tensor", [](World& w) { (void)w.v.masked_fill(w.bl.reshape({3, 1}), 0); },
       "masked_fill", {"broadcast"}},
      {"add_: into an expanded view", [](World& w) { w.b.unsqueeze(0).expand({3, 4}).add_(1); }, "add_", {"expanded"}},
      {"size: dim out of range", [](World& w) { (void)w.a.size(2); }, "size", {"out of range"}},
      {"item: several elements", [](World& w) { (void)w.a.item<float>(); }, "item", {"6 elements"}},

      // Reductions.
      {"sum: dim out of range", [](World& w) { (void)w.a.sum({2}); }, "sum", {"out of range"}},
      {"sum: repeated dim", [](World& w) { (void)w.a.sum({0, -2}); }, "sum", {"appears twice"}},
      {"mean: negative dim out of range", [](World& w) { (void)w.a.mean({-3}); }, "mean", {"out of range"}},
      {"amax: empty dimension", [](World& w) { (void)w.a.slice(0, 0, 0).amax({0}); }, "amax", {"size 0"}},
      {"argmax: empty tensor", [](World& w) { (void)w.a.slice(1, 0, 0).argmax(); }, "argmax", {"empty"}},
      {"softmax: dim out of range", [](World& w) { (void)w.a.softmax(2); }, "softmax", {"out of range"}},
      {"logsumexp: dim out of range", [](World& w) { (void)w.a.logsumexp({3}); }, "logsumexp", {"out of range"}},

      // Wrong dtypes.
      {"mean: int64", [](World& w) { (void)w.i64.mean(); }, "mean", {"int64"}},
      {"softmax: int64", [](World& w) { (void)w.i64.softmax(0); }, "softmax", {"int64"}},
      {"argmax: bool", [](World& w) { (void)w.bl.argmax(); }, "argmax", {"bool"}},
      {"matmul: int64 by float32", [](World& w) { (void)matmul(w.i64, w.b.slice(0, 0, 3)); }, "matmul", {"int64", "float32"}},
      {"matmul: bool", [](World& w) { (void)matmul(w.bl, w.bl); }, "matmul", {"bool"}},
      {"sub: bool", [](World& w) { (void)w.bl.sub(w.bl); }, "sub", {"bool"}},
      {"neg: bool", [](World& w) { (void)w.bl.neg(); }, "neg", {"bool"}},
      {"gelu: int64", [](World& w) { (void)w.i64.gelu(); }, "gelu", {"int64"}},
      {"mul_: float result into int64", [](World& w) { w.i64.mul_(0.5); }, "mul_", {"can't be cast"}},
      {"exp_: float result into int64", [](World& w) { w.i64.exp_(); }, "exp_", {"can't be cast"}},
      {"add: float alpha on int64", [](World& w) { (void)w.i64.add(w.i64, 0.5); }, "add", {"alpha"}},
      {"where: condition not bool", [](World& w) { (void)where(w.i64, w.i64, w.i64); }, "where", {"condition must be bool"}},
      {"masked_fill: mask not bool", [](World& w) { (void)w.b.masked_fill(w.b, 0); }, "masked_fill", {"mask must be bool"}},
      {"clamp: no bounds", [](World& w) { (void)w.a.clamp(std::nullopt, std::nullopt); }, "clamp", {"at least one"}},
      {"index_select: float index", [](World& w) { (void)w.a.index_select(0, w.b); }, "index_select", {"integer tensor"}},
      {"index_copy_: source dtype", [](World& w) { w.b.index_copy_(0, w.i64, w.i64); }, "index_copy_", {"dtype"}},
      {"rand: int64 dtype", [](World&) { (void)rand({2}, kInt64); }, "rand", {"int64"}},
      {"randn: bool dtype", [](World&) { (void)randn({2}, kBool); }, "randn", {"bool"}},
      {"randint: bool dtype", [](World&) { (void)randint(0, 2, {2}, kBool); }, "randint", {"bool"}},

      // Negative or huge sizes, bad creation arguments.
      {"tensor: too few values", [](World&) { (void)tensor<float>({1, 2, 3}, {2, 2}); }, "tensor", {"3 values"}},
      {"tensor: negative dimension", [](World&) { (void)tensor<float>({}, {-1}); }, "tensor", {"negative dimension"}},
      {"zeros: negative dimension", [](World&) { (void)zeros({-1, 2}); }, "full", {"negative dimension"}},
      {"ones: huge", [](World&) { (void)ones({1 << 30, 1 << 30}); }, "full", {"too many elements"}},
      {"full: huge", [](World&) { (void)full({int64_t{1} << 62, 4}, 1.0); }, "full", {"too many elements"}},
      {"rand: negative dimension", [](World&) { (void)rand({3, -4}); }, "rand", {"negative dimension"}},
      {"randn: huge", [](World&) { (void)randn({int64_t{1} << 41}); }, "randn", {"too many elements"}},
      {"randint: empty range", [](World&) { (void)randint(5, 5, {2}); }, "randint", {"greater than low"}},
      {"arange: zero step", [](World&) { (void)arange(0, 10, 0); }, "arange", {"nonzero"}},
      {"arange: wrong sign", [](World&) { (void)arange(0, 10, -1); }, "arange", {"disagree in sign"}},
      {"arange: huge", [](World&) { (void)arange(0.0, 1e15, 1e-3); }, "arange", {"too many elements"}},

      // Out-of-range indices known at trace time.
      {"select: index past the end", [](World& w) { (void)w.a.select(0, 2); }, "select", {"index 2", "size 2"}},
      {"select: negative index", [](World& w) { (void)w.a.select(1, -4); }, "select", {"index -4"}},
      {"select: 0-d", [](World&) { (void)scalar_tensor(1.0).select(0, 0); }, "select", {"0-d"}},
      {"slice: zero step", [](World& w) { (void)w.a.slice(0, 0, 1, 0); }, "slice", {"step must be positive"}},
      {"narrow: past the end", [](World& w) { (void)w.a.narrow(1, 2, 2); }, "narrow", {"exceed"}},
      {"index_select: index 5 of 2", [](World& w) { (void)w.a.index_select(0, tensor<int64_t>({0, 5})); },
       "index_select", {"index 5"}},
      {"index_select: negative index", [](World& w) { (void)w.a.index_select(1, tensor<int64_t>({-1})); },
       "index_select", {"index -1"}},
      {"index_select: 2-D index", [](World& w) { (void)w.a.index_select(0, tensor<int64_t>({0, 1}, {1, 2})); },
       "index_select", {"0-D or 1-D"}},
      {"gather: index out of range", [](World& w) { (void)w.a.gather(1, tensor<int64_t>({0, 3}, {1, 2})); },
       "gather", {"index 3"}},
      {"gather: rank differs", [](World& w) { (void)w.a.gather(0, w.i64); }, "gather", {"same rank"}},
      {"scatter_: index out of range",
       [](World& w) { w.a.scatter_(0, tensor<int64_t>({2, 0, 0}, {1, 3}), w.a); }, "scatter_", {"index 2"}},
      {"scatter_add: rank differs", [](World& w) { (void)w.a.scatter_add(0, w.i64, w.a); }, "scatter_add", {"same rank"}},
      {"index_copy_: index out of range",
       [](World& w) { w.b.index_copy_(0, tensor<int64_t>({4}), tensor<float>({1}, {1})); }, "index_copy_", {"index 4"}},
      {"index_copy_: source shape", [](World& w) { w.b.index_copy_(0, w.i64, w.b); }, "index_copy_", {"must have shape"}},
      {"index_put_: too many indices", [](World& w) { w.b.index_put_({w.i64, w.i64}, w.b); }, "index_put_", {"index tensors"}},
      {"index_put_: index out of range", [](World& w) { w.b.index_put_({tensor<int64_t>({4})}, scalar_tensor(1.0)); },
       "index_put_", {"index 4"}},

      // Undefined handles.
      {"relu: undefined tensor", [](World&) { (void)Tensor().relu(); }, "relu", {"undefined tensor"}},
      {"add: undefined operand", [](World& w) { (void)w.a.add(Tensor()); }, "add", {"undefined tensor"}},
      {"sync: undefined tensor", [](World& w) { sync({w.a, Tensor()}); }, "sync", {"undefined tensor"}},
      {"set_buffer_donation: undefined", [](World&) { (void)set_buffer_donation(Tensor(), true); },
       "set_buffer_donation", {"undefined"}},
      {"is_donated: undefined", [](World&) { (void)is_donated(Tensor()); }, "is_donated", {"undefined"}},
      {"shape: undefined", [](World&) { (void)Tensor().shape(); }, "shape", {"undefined"}},
      {"cat: undefined member", [](World& w) { (void)cat({w.a, Tensor()}); }, "cat", {"undefined"}},

      // Reading or writing a donated tensor.
      {"to_vector: donated", [](World& w) { (void)w.gone.to_vector<float>(); }, "to_vector", {"donated"}},
      {"item: donated", [](World& w) { (void)w.gone.select(0, 0).item<float>(); }, "item", {"donated"}},
      {"print: donated", [](World& w) { (void)w.gone.to_string(); }, "print", {"donated"}},
      {"add: donated operand", [](World& w) { (void)w.b.slice(0, 0, 2).add(w.gone); }, "add", {"donated"}},
      {"add_: into a donated tensor", [](World& w) { w.gone.add_(1); }, "add_", {"donated"}},
      {"fill_: donated", [](World& w) { w.gone.fill_(0); }, "fill_", {"donated"}},
      {"copy_: into a donated tensor", [](World& w) { w.gone.copy_(w.b.slice(0, 0, 2)); }, "copy_", {"donated"}},
      {"copy_: from a donated tensor", [](World& w) { w.b.slice(0, 0, 2).copy_(w.gone); }, "copy_", {"donated"}},
      {"clone: donated", [](World& w) { (void)w.gone.clone(); }, "clone", {"donated"}},
      {"sum: donated", [](World& w) { (void)w.gone.sum(); }, "sum", {"donated"}},
      {"matmul: donated", [](World& w) { (void)matmul(w.gone, w.gone); }, "matmul", {"donated"}},
      {"sync: donated", [](World& w) { sync({w.p, w.gone}); }, "sync", {"donated"}},

      // Unknown and dead backends.
      {"set_backend: unknown", [](World&) { set_backend("tpu"); }, "backend", {"unknown backend 'tpu'"}},
      {"dead backend: mark_step", [](World&) { set_backend_alive(false); mark_step(); }, "mark_step", {"dead"}},
      {"dead backend: sync", [](World& w) { set_backend_alive(false); sync({w.p}); }, "sync", {"dead"}},
      {"dead backend: read", [](World& w) { set_backend_alive(false); (void)w.p.to_vector<float>(); }, "read", {"dead"}},
      {"dead backend: tensor()", [](World&) { set_backend_alive(false); (void)tensor<float>({1}); }, "tensor", {"dead"}},
      {"dead backend: new scalar_tensor", [](World&) { set_backend_alive(false); (void)scalar_tensor(0.123456); },
       "scalar_tensor", {"dead"}},

      // Failures found while running a program (indices computed lazily): the whole sync fails,
      // nothing is donated or committed, and every other tensor is untouched.
      {"index_select: lazy index out of range at mark_step",
       [](World& w) {
         Tensor bad = w.a.index_select(0, tensor<int64_t>({0, 1}) * 2);
         mark_step();
       },
       "index_select", {"index 2", "nothing was changed"}},
      {"gather: lazy index out of range at a read",
       [](World& w) {
         Tensor idx = tensor<int64_t>({0, 1, 1}, {1, 3}) * 3;
         (void)w.a.gather(1, idx).to_vector<float>();
       },
       "gather", {"index 3"}},
      {"index_copy_: lazy index out of range while the target would be donated",
       [](World&) {
         Tensor x = tensor<float>({1, 2, 3}, {3});
         Tensor old = x * 1;  // reads x's buffer in the same program
         x.index_copy_(0, tensor<int64_t>({1}) + 5, tensor<float>({9}, {1}));
         try {
           mark_step();
         } catch (const Error&) {
           x = Tensor();  // drop the tensor that cannot be computed
           // `old` still reads x's buffer, which the failed program was to overwrite.
           EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1, 2, 3}));
           throw;
         }
       },
       "index_copy", {"index 6"}},
      {"scatter_add_: lazy index out of range at a partial sync",
       [](World& w) {
         Tensor idx = tensor<int64_t>({0, 0, 0}, {1, 3}) - 1;
         Tensor y = w.a.clone();
         y.scatter_add_(0, idx, w.a);
         sync({y, w.p});
       },
       "scatter_add", {"index -1"}},
  };
  return c;
}

class BadInput : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_backend(GetParam());
    set_backend_alive(true);
    mark_step();
  }
  void TearDown() override { set_backend_alive(true); }
};

TEST_P(BadInput, EveryCaseRaisesANamedErrorAndChangesNothing) {
  (void)scalar_tensor(1.0);  // the constant cache keeps this one for good
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    set_backend(GetParam());
    set_backend_alive(true);
    mark_step();
    const int64_t bytes_start = memory_stats().bytes_in_use;
    int64_t bytes_before = 0;
    {
      World w;
      bytes_before = memory_stats().bytes_in_use;
      std::string msg;
      try {
        c.fn(w);
        ADD_FAILURE() << "expected lazyx::Error";
      } catch (const Error& e) {
        msg = e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "expected lazyx::Error, got another exception: " << e.what();
      }
      set_backend_alive(true);
      std::string prefix = std::string("[") + c.op + "]";
      EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message does not start with " << prefix << ": " << msg;
      for (const std::string& p : c.parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
      EXPECT_EQ(backend_name(), GetParam());

      // Unchanged state.
      EXPECT_EQ(memory_stats().bytes_in_use, bytes_before) << "a failed call left buffers allocated";
      EXPECT_FALSE(w.a.is_pending());
      EXPECT_TRUE(w.p.is_pending());
      EXPECT_TRUE(w.w.is_pending());
      EXPECT_TRUE(is_donated(w.gone));
      EXPECT_EQ(w.a.to_vector<float>(), iota(6));
      EXPECT_EQ(w.b.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
      EXPECT_EQ(w.v.to_vector<float>(), (std::vector<float>{3, 4, 5}));
      EXPECT_EQ(w.i64.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
      mark_step();
      EXPECT_EQ(last_step().num_donated, 1) << "w's in-place update is still donated";
      EXPECT_EQ(w.p.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
      EXPECT_EQ(w.w.to_vector<float>(), (std::vector<float>{11, 21}));
      EXPECT_THROW(w.gone.to_vector<float>(), Error);
    }
    EXPECT_EQ(memory_stats().bytes_in_use, bytes_start) << "every buffer of the case is freed with its tensors";
  }
}

// A failed program can be retried: the same failing sync fails the same way, and once the
// bad tensor is gone everything else syncs.
TEST_P(BadInput, SyncAfterAFailedExecution) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {4});
  Tensor y = x * 10;
  x.add_(1);  // would be donated
  Tensor bad = x.index_select(0, tensor<int64_t>({3}) + 1);
  for (int attempt = 0; attempt < 3; ++attempt) {
    testing::expect_error([&] { mark_step(); }, {"[index_select]", "index 4", "nothing was changed"});
    EXPECT_TRUE(x.is_pending());
    EXPECT_TRUE(y.is_pending());
  }
  testing::expect_error([&] { (void)bad.to_vector<float>(); }, {"[index_select]", "index 4"});
  // A partial sync that does not need the bad tensor works.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
  bad = Tensor();
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
}

// A dead backend fails every sync without changing anything, any number of times.
TEST_P(BadInput, DeadBackendThenRevived) {
  Tensor x = tensor<float>({1, 2}, {2});
  x.mul_(3);
  Tensor y = x + 1;
  set_backend_alive(false);
  for (int i = 0; i < 3; ++i) {
    testing::expect_error([&] { mark_step(); }, {"[mark_step]", "dead"});
    testing::expect_error([&] { sync({y}); }, {"[sync]", "dead"});
    testing::expect_error([&] { (void)y.select(0, 1).item<float>(); }, {"[read]", "dead"});
  }
  EXPECT_TRUE(x.is_pending());
  set_backend_alive(true);
  mark_step();
  EXPECT_EQ(last_step().num_donated, 1);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 7}));
}

INSTANTIATE_TEST_SUITE_P(Backends, BadInput, ::testing::ValuesIn(backend_names()));

}  // namespace
}  // namespace lazyx
