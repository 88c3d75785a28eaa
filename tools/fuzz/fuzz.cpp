// lazyx-fuzz: the runner (lazyx and the oracle side by side, with every check), the generator,
// the shrinker and the C++ emitter. See docs/FUZZING.md.
#include "fuzz.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "lazyx/lazyx.h"
#include "tensor/tensor_impl.h"

namespace lazyx::fuzz {

namespace {

constexpr double kBound = 1e3;  // results beyond this are skipped, keeping float error small

const double kScalars[] = {-2, -1.5, -1, -0.75, -0.5, -0.25, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3};
const Shape kShapes[] = {{4, 4}, {4}, {2, 4}, {4, 1}, {1, 4}, {3, 4},
                         {2, 3, 4}, {2, 2, 4}, {16}, {2, 8}, {}};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);

// ---- literals for emitted code ----

std::string lit(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  std::string s = b;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string list_cpp(const std::vector<int64_t>& v) {
  std::string r = "{";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "}";
}

std::string vals_cpp(const std::vector<double>& v, Dtype d) {
  std::string r = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    char b[64];
    std::snprintf(b, sizeof b, d == kFloat32 ? "%.9g" : "%.17g", v[i]);
    r += (i ? ", " : "") + std::string(b);
  }
  return r + "}";
}

// Appending avoids g++ 12's false -Wrestrict on "literal" + std::string.
std::string T(int s) {
  std::string r = "t";
  r += std::to_string(s);
  return r;
}

// ---- op tables ----

double f_neg(double x) { return -x; }
double f_abs(double x) { return std::fabs(x); }
double f_tanh(double x) { return std::tanh(x); }
double f_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double f_relu(double x) { return x > 0 ? x : 0.0; }
double f_sin(double x) { return std::sin(x); }
double f_cos(double x) { return std::cos(x); }
double f_exp(double x) { return std::exp(x); }
double f_sqrt(double x) { return std::sqrt(x); }
double f_square(double x) { return std::pow(x, 2.0); }
double f_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

struct UnaryDef {
  const char* name;
  double (*f)(double);
  bool inplace;
};
// sqrt_abs is abs then sqrt (two ops, or a chain of two in-place ops).
const UnaryDef kUnary[] = {{"neg", f_neg, true},         {"abs", f_abs, true},
                           {"tanh", f_tanh, true},       {"sigmoid", f_sigmoid, true},
                           {"relu", f_relu, true},       {"sin", f_sin, true},
                           {"cos", f_cos, true},         {"exp", f_exp, true},
                           {"sqrt_abs", nullptr, true},  {"square", f_square, true},
                           {"gelu", f_gelu, false}};
constexpr int kNumUnary = sizeof(kUnary) / sizeof(kUnary[0]);

constexpr int kNumBinary = 8;
constexpr int kNumBinS = 5;
const char* kReduce[] = {"sum", "mean", "amax", "amin", "logsumexp"};

Tensor eng_unary(int op, const Tensor& x) {
  switch (op) {
    case 0: return x.neg();
    case 1: return x.abs();
    case 2: return x.tanh();
    case 3: return x.sigmoid();
    case 4: return x.relu();
    case 5: return x.sin();
    case 6: return x.cos();
    case 7: return x.exp();
    case 8: return x.abs().sqrt();
    case 9: return x.pow(2);
    default: return x.gelu();
  }
}
void eng_unary_(int op, Tensor& x) {
  switch (op) {
    case 0: x.neg_(); return;
    case 1: x.abs_(); return;
    case 2: x.tanh_(); return;
    case 3: x.sigmoid_(); return;
    case 4: x.relu_(); return;
    case 5: x.sin_(); return;
    case 6: x.cos_(); return;
    case 7: x.exp_(); return;
    case 8: x.abs_().sqrt_(); return;
    default: x.pow_(2); return;
  }
}
std::string cpp_unary(int op, const std::string& x, bool inplace) {
  static const char* oop[] = {"neg()", "abs()", "tanh()", "sigmoid()", "relu()", "sin()",
                              "cos()", "exp()", "abs().sqrt()", "pow(2)", "gelu()"};
  static const char* inp[] = {"neg_()", "abs_()", "tanh_()", "sigmoid_()", "relu_()", "sin_()",
                              "cos_()", "exp_()", "abs_().sqrt_()", "pow_(2)", ""};
  return x + "." + (inplace ? inp[op] : oop[op]);
}

// a op b on the engine: out of place, or in place into a.
Tensor eng_binary(int op, const Tensor& a, const Tensor& b, double alpha) {
  switch (op) {
    case 0: return a.add(b);
    case 1: return a.sub(b);
    case 2: return a.mul(b);
    case 3: return a.add(b, alpha);
    case 4: return a.sub(b, alpha);
    case 5: return maximum(a, b);
    case 6: return minimum(a, b);
    default: return a.div(b.abs().add(1));
  }
}
void eng_binary_(int op, Tensor& a, const Tensor& b, double alpha) {
  switch (op) {
    case 0: a.add_(b); return;
    case 1: a.sub_(b); return;
    case 2: a.mul_(b); return;
    case 3: a.add_(b, alpha); return;
    case 4: a.sub_(b, alpha); return;
    case 5: a.copy_(maximum(a, b)); return;
    case 6: a.copy_(minimum(a, b)); return;
    default: a.div_(b.abs().add(1)); return;
  }
}
std::string cpp_binary(int op, const std::string& a, const std::string& b, double alpha,
                       bool inplace) {
  std::string s = inplace ? "_(" : "(";
  switch (op) {
    case 0: return a + ".add" + s + b + ")";
    case 1: return a + ".sub" + s + b + ")";
    case 2: return a + ".mul" + s + b + ")";
    case 3: return a + ".add" + s + b + ", " + lit(alpha) + ")";
    case 4: return a + ".sub" + s + b + ", " + lit(alpha) + ")";
    case 5: return inplace ? a + ".copy_(maximum(" + a + ", " + b + "))" : "maximum(" + a + ", " + b + ")";
    case 6: return inplace ? a + ".copy_(minimum(" + a + ", " + b + "))" : "minimum(" + a + ", " + b + ")";
    default: return a + ".div" + s + b + ".abs().add(1))";
  }
}

Tensor eng_bins(int op, const Tensor& a, double s) {
  switch (op) {
    case 0: return a.add(s);
    case 1: return a.sub(s);
    case 2: return a.mul(s);
    case 3: return a.div(s);
    default: return s - a;
  }
}
void eng_bins_(int op, Tensor& a, double s) {
  switch (op) {
    case 0: a.add_(s); return;
    case 1: a.sub_(s); return;
    case 2: a.mul_(s); return;
    case 3: a.div_(s); return;
    default: a.neg_().add_(s); return;
  }
}
std::string cpp_bins(int op, const std::string& a, double s, bool inplace) {
  std::string u = inplace ? "_(" : "(";
  switch (op) {
    case 0: return a + ".add" + u + lit(s) + ")";
    case 1: return a + ".sub" + u + lit(s) + ")";
    case 2: return a + ".mul" + u + lit(s) + ")";
    case 3: return a + ".div" + u + lit(s) + ")";
    default: return inplace ? a + ".neg_().add_(" + lit(s) + ")" : lit(s) + " - " + a;
  }
}

// Elementwise binary over dense values with broadcasting, in dtype `rt`.
Dense dense_binary(const Dense& a, const Dense& b, Dtype rt, const std::function<double(double, double)>& f) {
  Shape s = *broadcast(a.shape, b.shape);
  Dense x = broadcast_to(a, s), y = broadcast_to(b, s);
  Dense r;
  r.shape = s;
  r.dtype = rt;
  r.v.resize(x.v.size());
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = round_to(f(x.v[i], y.v[i]), rt);
  return r;
}

Dense oracle_binary(int op, const Dense& a, const Dense& b, double alpha, bool bug) {
  bool a0 = a.shape.empty(), b0 = b.shape.empty();
  Dtype rt = result_dtype(a.dtype, a0, b.dtype, b0);
  switch (op) {
    case 0: return dense_binary(a, b, rt, [bug](double x, double y) { return x + y + (bug ? 1.0 / 64 : 0.0); });
    case 1: return dense_binary(a, b, rt, [](double x, double y) { return x - y; });
    case 2: return dense_binary(a, b, rt, [](double x, double y) { return x * y; });
    case 3: {
      double al = round_to(alpha, rt);
      return dense_binary(a, b, rt, [al](double x, double y) { return x + al * y; });
    }
    case 4: {
      double al = round_to(alpha, rt);
      return dense_binary(a, b, rt, [al](double x, double y) { return x - al * y; });
    }
    case 5: return dense_binary(a, b, rt, [](double x, double y) { return std::max(x, y); });
    case 6: return dense_binary(a, b, rt, [](double x, double y) { return std::min(x, y); });
    default: {
      Dense d = map1(b, f_abs);
      for (double& v : d.v) v = round_to(v + 1, d.dtype);
      Dtype rt2 = result_dtype(a.dtype, a0, d.dtype, b0);
      return dense_binary(a, d, rt2, [](double x, double y) { return x / y; });
    }
  }
}

Dense oracle_bins(int op, const Dense& a, double s) {
  Dense r = a;
  double sv = round_to(s, a.dtype);
  for (double& x : r.v) {
    double v = 0;
    switch (op) {
      case 0: v = x + sv; break;
      case 1: v = x - sv; break;
      case 2: v = x * sv; break;
      case 3: v = x / sv; break;
      default: v = sv - x; break;
    }
    x = round_to(v, a.dtype);
  }
  return r;
}

Dense oracle_unary(int op, const Dense& a) {
  if (op == 8) return map1(map1(a, f_abs), f_sqrt);
  return map1(a, kUnary[op].f);
}

// Candidate shapes for reshape/view of n elements, deterministic.
std::vector<Shape> factorizations(int64_t n) {
  std::vector<Shape> r;
  r.push_back({n});
  for (int64_t a = 1; a <= n; ++a) {
    if (n % a) continue;
    r.push_back({a, n / a});
    for (int64_t b = 1; b <= n / a; ++b) {
      if ((n / a) % b) continue;
      r.push_back({a, b, n / a / b});
    }
  }
  return r;
}

bool close(double got, double want, double scale) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 1e-3 + 1e-4 * std::fabs(want) + 1e-5 * scale;
}

// ---- the runner ----

struct Res {
  bool ok = false;
  int64_t dim = 0, idx = 0, start = 0, end = 0, step = 1, d0 = 0, d1 = 0;
  Shape shape;
  std::vector<int64_t> dims, ilist, ilist2;
  Dtype dtype = kFloat32;
  std::vector<int> slots;
};

class Runner {
 public:
  Runner(const RunOptions& opt, bool engine) : opt_(opt), engine_(engine) {}

  Failure failure;
  Stats stats;
  std::vector<std::string> code;
  std::vector<std::vector<double>> reads;
  std::array<std::optional<OTensor>, kSlots> os;
  std::array<Tensor, kSlots> ls;
  Oracle oracle;

  bool has(int s) const { return s >= 0 && s < kSlots && os[s].has_value(); }
  const OTensor& O(int s) const { return *os[s]; }

  Res resolve(const Ins& in) const;
  bool valid(const Ins& in) const { return resolve(in).ok; }
  void step(const Ins& in, size_t index);
  void finish(size_t index);
  void clear() {
    for (int s = 0; s < kSlots; ++s) {
      os[s].reset();
      ls[s] = Tensor();
    }
  }

 private:
  const RunOptions& opt_;
  bool engine_;
  size_t index_ = 0;

  void emit(const std::string& line) {
    if (opt_.emit) code.push_back(line);
  }
  void fail(const std::string& cat, const std::string& msg, const std::string& cpp = "") {
    if (failure.failed) return;
    failure.failed = true;
    failure.category = cat;
    failure.message = msg;
    failure.at = index_;
    if (!cpp.empty()) emit(cpp + "  // fails: " + cat);
  }
  template <typename F>
  bool eng(const std::string& what, F f) {
    if (!engine_) return true;
    try {
      f();
      return true;
    } catch (const Error& e) {
      fail("unexpected-error", what + " raised: " + e.what());
    } catch (const std::exception& e) {
      fail("unexpected-error", what + " raised a non-lazyx exception: " + e.what());
    }
    return false;
  }
  // An op the oracle knows must fail: lazyx must raise lazyx::Error mentioning `contains`.
  template <typename F>
  void expect_error(const std::string& cpp, F f, const char* contains) {
    stats.expected_errors++;
    emit("EXPECT_THROW(" + cpp + ", lazyx::Error);");
    if (!engine_) return;
    try {
      f();
      fail("missing-error", cpp + " should raise lazyx::Error (" + contains + ")");
    } catch (const Error& e) {
      if (contains[0] && !std::strstr(e.what(), contains)) {
        fail("error-message", cpp + " raised \"" + e.what() + "\", expected it to mention '" + contains + "'");
      }
    } catch (const std::exception& e) {
      fail("unexpected-error", cpp + " raised a non-lazyx exception: " + e.what());
    }
  }

  void set_dst(int d, OTensor o, Tensor l) {
    os[d] = std::move(o);
    ls[d] = std::move(l);
  }
  bool any_donated(std::initializer_list<int> slots) const {
    for (int s : slots) {
      if (O(s).st->donated) return true;
    }
    return false;
  }
  void check_meta(int d, const std::string& what);
  void compare(int s, const std::vector<double>& got, const Dense& want, const std::string& cpp_read,
               bool emit_always);
  void model_checks(bool after_sync);
  void sync_common(const std::vector<OStorage*>& targets, const std::string& kind,
                   bool engine_synced);
  void do_mark_step(bool emit_line);
  void read_back_all();
  void new_result(int d, const Dense& value, const Expr& e, Tensor l, const std::string& cpp);
  void inplace(int a, const Dense& value, const Expr& e, const std::function<void(Tensor&)>& f,
               const std::string& cpp, std::initializer_list<int> reads);
};

Res Runner::resolve(const Ins& in) const {
  Res r;
  auto need = [&](int s) { return has(s); };
  switch (in.k) {
    case K::Const:
    case K::Full:
    case K::Arange:
      r.ok = in.d >= 0 && in.d < kSlots && (in.k != K::Const || in.vals.size() == static_cast<size_t>(numel_of(in.shape)));
      r.shape = in.shape;
      return r;
    case K::ScalarT:
      r.ok = in.d >= 0 && in.d < kSlots;
      return r;
    case K::Unary:
      r.ok = need(in.a) && in.op >= 0 && in.op < kNumUnary;
      return r;
    case K::UnaryI:
      r.ok = need(in.a) && in.op >= 0 && in.op < kNumUnary && kUnary[in.op].inplace;
      return r;
    case K::Binary:
    case K::Where:
      r.ok = need(in.a) && need(in.b) && broadcast(O(in.a).sizes, O(in.b).sizes).has_value() &&
             in.op >= 0 && in.op < kNumBinary;
      return r;
    case K::BinaryI:
    case K::Copy:
    case K::MaskedFill: {
      if (!need(in.a) || !need(in.b) || in.op < 0 || in.op >= kNumBinary) return r;
      auto b = broadcast(O(in.a).sizes, O(in.b).sizes);
      r.ok = b && *b == O(in.a).sizes;
      return r;
    }
    case K::BinS:
    case K::BinSI:
      r.ok = need(in.a) && in.op >= 0 && in.op < kNumBinS && in.s0 != 0;
      return r;
    case K::Clamp:
    case K::ClampI:
      r.ok = need(in.a) && in.s0 < in.s1;
      return r;
    case K::Reduce: {
      if (!need(in.a) || in.op < 0 || in.op > 4) return r;
      int64_t rank = O(in.a).rank();
      for (int64_t d = 0; d < rank; ++d) {
        if ((in.i0 >> d) & 1) r.dims.push_back(d);
      }
      r.ok = true;
      return r;
    }
    case K::Softmax:
      if (!need(in.a) || O(in.a).rank() == 0) return r;
      r.dim = in.i0 % O(in.a).rank();
      r.ok = true;
      return r;
    case K::Matmul: {
      if (!need(in.a) || !need(in.b)) return r;
      const OTensor &a = O(in.a), &b = O(in.b);
      if (a.rank() < 1 || a.rank() > 2 || b.rank() < 1 || b.rank() > 2) return r;
      if (a.st->dtype != b.st->dtype) return r;
      int64_t k2 = b.rank() == 1 ? b.sizes[0] : b.sizes[0];
      r.ok = a.sizes.back() == k2;
      return r;
    }
    case K::Select:
    case K::Slice:
    case K::IndexSelect:
    case K::IndexCopy: {
      if (!need(in.a) || O(in.a).rank() == 0) return r;
      const OTensor& a = O(in.a);
      r.dim = in.i0 % a.rank();
      int64_t size = a.sizes[r.dim];
      if (size == 0) return r;
      r.idx = in.i1 % size;
      r.start = in.i1 % size;
      r.end = r.start + 1 + in.i2 % (size - r.start);
      r.step = 1 + in.i3 % 2;
      for (size_t k = 0; k < in.vals.size() && k < 6; ++k) {
        r.ilist.push_back(static_cast<int64_t>(std::fabs(in.vals[k])) % size);
      }
      if (in.k == K::IndexCopy) {
        // Distinct destinations (index_copy_ with repeats has no defined order); sources any.
        std::vector<int64_t> dst;
        for (int64_t v : r.ilist) {
          if (std::find(dst.begin(), dst.end(), v) == dst.end()) dst.push_back(v);
        }
        r.ilist = dst;
        for (size_t k = 0; k < r.ilist.size(); ++k) r.ilist2.push_back((r.ilist[k] + in.i1) % size);
      }
      r.ok = in.k == K::Select || in.k == K::Slice || !r.ilist.empty();
      return r;
    }
    case K::Transpose:
      if (!need(in.a) || O(in.a).rank() < 2) return r;
      r.d0 = in.i0 % O(in.a).rank();
      r.d1 = in.i1 % O(in.a).rank();
      r.ok = true;
      return r;
    case K::Reshape:
    case K::View: {
      if (!need(in.a)) return r;
      auto f = factorizations(numel_of(O(in.a).sizes));
      r.shape = f[in.i0 % f.size()];
      r.ok = true;
      return r;
    }
    case K::Unsqueeze:
      if (!need(in.a) || O(in.a).rank() > 3) return r;
      r.dim = in.i0 % (O(in.a).rank() + 1);
      r.ok = true;
      return r;
    case K::Expand: {
      if (!need(in.a)) return r;
      const OTensor& a = O(in.a);
      r.shape = a.sizes;
      bool any = false;
      for (auto& s : r.shape) {
        if (s == 1) {
          s = 2 + in.i0 % 2;
          any = true;
        }
      }
      if (!any) {
        if (a.rank() > 2) return r;
        r.shape.insert(r.shape.begin(), 2 + in.i0 % 2);
      }
      r.ok = true;
      return r;
    }
    case K::Permute: {
      if (!need(in.a) || O(in.a).rank() != 3) return r;
      static const int64_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      const int64_t* p = perms[in.i0 % 6];
      r.dims = {p[0], p[1], p[2]};
      r.ok = true;
      return r;
    }
    case K::Clone:
    case K::Contig:
    case K::Read:
    case K::Fill:
    case K::Donate:
    case K::Undonate:
      r.ok = need(in.a);
      return r;
    case K::To:
      if (!need(in.a)) return r;
      r.dtype = (in.i0 & 1) ? (O(in.a).st->dtype == kFloat32 ? kFloat64 : kFloat32) : O(in.a).st->dtype;
      r.ok = true;
      return r;
    case K::Dup:
      r.ok = need(in.a) && in.d >= 0 && in.d < kSlots;
      return r;
    case K::Drop:
      r.ok = need(in.a);
      return r;
    case K::Sync:
      for (int s = 0; s < kSlots; ++s) {
        if (((in.i0 >> s) & 1) && has(s)) r.slots.push_back(s);
      }
      r.ok = !r.slots.empty();
      return r;
    case K::MarkStep:
      r.ok = true;
      return r;
    default:
      return r;
  }
}

void Runner::check_meta(int d, const std::string& what) {
  if (!engine_ || failure.failed) return;
  const OTensor& o = O(d);
  const Tensor& t = ls[d];
  if (t.shape() != o.sizes || t.strides() != o.strides || t.storage_offset() != o.offset ||
      t.dtype() != o.st->dtype || t.is_view() != o.is_view) {
    std::ostringstream m;
    m << what << ": lazyx gives shape " << shape_cpp(t.shape()) << " strides " << shape_cpp(t.strides())
      << " offset " << t.storage_offset() << " " << dtype_name(t.dtype()) << (t.is_view() ? " view" : "")
      << ", the oracle " << shape_cpp(o.sizes) << " strides " << shape_cpp(o.strides) << " offset "
      << o.offset << " " << dtype_name(o.st->dtype) << (o.is_view ? " view" : "");
    fail("metadata", m.str(),
         "EXPECT_EQ(" + T(d) + ".shape(), (Shape" + shape_cpp(o.sizes) + ")); EXPECT_EQ(" + T(d) +
             ".strides(), (Shape" + shape_cpp(o.strides) + "));");
  }
}

void Runner::compare(int s, const std::vector<double>& got, const Dense& want, const std::string& cpp_read,
                     bool emit_always) {
  stats.reads++;
  std::string cpp = "expect_values(" + cpp_read + ", " + vals_cpp(want.v, want.dtype) + ");";
  if (emit_always) emit(cpp);
  if (!engine_) return;
  reads.push_back(got);
  if (got.size() != want.v.size()) {
    fail("value", "reading " + T(s) + ": lazyx gave " + std::to_string(got.size()) + " values, the oracle " +
                      std::to_string(want.v.size()),
         emit_always ? "" : cpp);
    return;
  }
  double scale = want.max_abs();
  for (size_t i = 0; i < got.size(); ++i) {
    stats.values_compared++;
    if (!close(got[i], want.v[i], scale)) {
      char b[200];
      std::snprintf(b, sizeof b, "reading %s: element %zu is %.9g in lazyx, %.9g in the oracle", T(s).c_str(), i,
                    got[i], want.v[i]);
      fail("value", b, emit_always ? "" : cpp);
      return;
    }
  }
}

// The engine's view of every live slot agrees with the oracle's model.
void Runner::model_checks(bool after_sync) {
  if (!engine_ || failure.failed) return;
  for (int s = 0; s < kSlots; ++s) {
    if (!has(s)) continue;
    Storage* es = ls[s].impl()->storage().get();
    const OStorage& st = *O(s).st;
    for (int u = 0; u < s; ++u) {
      if (!has(u)) continue;
      bool same_e = ls[u].impl()->storage().get() == es, same_o = O(u).st.get() == &st;
      if (same_e != same_o) {
        fail("model-storage", T(u) + " and " + T(s) + (same_o ? " should" : " should not") + " share a storage");
        return;
      }
      if (after_sync && same_o == false && st.buf && !st.pending && !O(u).st->pending && !st.donated &&
          !O(u).st->donated) {
        bool same_buf_o = O(u).st->buf == st.buf;
        bool same_buf_e = ls[u].impl()->storage()->data() == es->data();
        if (same_buf_o != same_buf_e) {
          fail("model-sharing", T(u) + " and " + T(s) + (same_buf_o ? " should" : " should not") +
                                    " hold the same buffer (copy-on-write sharing)",
               "EXPECT_EQ(" + T(u) + ".impl()->storage()->data() == " + T(s) + ".impl()->storage()->data(), " +
                   (same_buf_o ? "true" : "false") + ");");
          return;
        }
      }
    }
    if (es->pending() != st.pending) {
      fail("model-pending", T(s) + " should " + (st.pending ? "" : "not ") + "be pending",
           "EXPECT_EQ(" + T(s) + ".is_pending(), " + (st.pending ? "true" : "false") + ");");
      return;
    }
    if (es->donated() != st.donated) {
      fail("model-donated", T(s) + " should " + (st.donated ? "" : "not ") + "be donated",
           "EXPECT_EQ(is_donated(" + T(s) + "), " + (st.donated ? "true" : "false") + ");");
      return;
    }
    if (es->donate_flag() != st.flagged) {
      fail("model-flag", T(s) + " should " + (st.flagged ? "" : "not ") + "carry the donation flag",
           "EXPECT_EQ(get_buffer_donation(" + T(s) + "), " + (st.flagged ? "true" : "false") + ");");
      return;
    }
    if (after_sync && st.buf && !st.donated) {
      if (!es->data()) {
        fail("model-sharing", T(s) + " should hold a buffer");
        return;
      }
      if (es->data()->pinned() != oracle.is_pinned(st.buf)) {
        fail("model-sharing", T(s) + "'s buffer should " + (oracle.is_pinned(st.buf) ? "" : "not ") + "be pinned");
        return;
      }
    }
  }
}

// After lazyx ran a sync (mark_step, sync or read) of `targets`: update the oracle's model,
// adopt user-requested donations after checking they were legal, and check the report.
void Runner::sync_common(const std::vector<OStorage*>& asked, const std::string& kind, bool engine_synced) {
  const std::vector<OStorage*> targets = kind == "mark_step" ? asked : oracle.with_kept_live(asked);
  std::set<int64_t> read_bufs;
  for (OStorage* t : targets) {
    if (t->pending) read_bufs.insert(t->expr.deps.begin(), t->expr.deps.end());
  }
  oracle.sync(targets);
  if (!engine_) return;
  stats.syncs++;
  if (engine_synced) {
    StepReport r = last_step();
    if (r.kind != kind) {
      fail("report", "last_step().kind is '" + r.kind + "', expected '" + kind + "'");
      return;
    }
    stats.cache_hits += r.cache_hit;
    int64_t donated = 0;
    for (const ParamReport& p : r.params) {
      stats.reasons[static_cast<int>(p.reason) & 15]++;
      if (!p.donated) continue;
      donated++;
      if (p.reason == AliasReason::InPlaceUpdate) stats.inplace_donations++;
      if (p.reason == AliasReason::UserRequested) stats.user_donations++;
      if (kind != "mark_step" && p.reason != AliasReason::UserRequested) {
        fail("partial-sync-donated", "a " + kind + " donated buffer " + std::to_string(p.buffer_id) + " (" +
                                         alias_reason_name(p.reason) + "): rule 2 forbids it\n" + r.to_string());
        return;
      }
    }
    if (donated != r.num_donated) {
      fail("report", "num_donated " + std::to_string(r.num_donated) + " but " + std::to_string(donated) +
                         " params say donated\n" + r.to_string());
      return;
    }
  }
  // Donations the engine chose: only flagged storages whose buffer this sync read may go.
  for (int s = 0; s < kSlots; ++s) {
    if (!has(s)) continue;
    OStorage* st = O(s).st.get();
    Storage* es = ls[s].impl()->storage().get();
    if (es->donated() && !st->donated) {
      if (!st->flagged) {
        fail("donation-illegal", T(s) + " was donated at a " + kind + " but never flagged by set_buffer_donation");
        return;
      }
      if (!read_bufs.count(st->buf)) {
        fail("donation-illegal", T(s) + " was donated at a " + kind + " whose program does not read its buffer");
        return;
      }
      oracle.mark_donated(st);
    }
  }
}

void Runner::read_back_all() {
  for (int s = 0; s < kSlots && !failure.failed; ++s) {
    if (!has(s) || O(s).st->donated) continue;
    Dense want = oracle.read(O(s));
    std::vector<double> got;
    if (!eng("reading " + T(s) + " after mark_step", [&] { got = ls[s].to_vector<double>(); })) return;
    compare(s, got, want, T(s) + ".to_vector<double>()", true);
  }
}

void Runner::do_mark_step(bool emit_line) {
  struct Must {
    int slot;
    Storage* es;
    int64_t buf_id;
  };
  std::vector<Must> must;
  std::vector<OStorage*> targets;
  auto live = oracle.live();
  std::set<int64_t> flagged_sizes;  // byte sizes of user-flagged buffers
  for (auto& s : live) {
    if (s->flagged) flagged_sizes.insert(numel_of(s->shape) * static_cast<int64_t>(dtype_size(s->dtype)));
    if (s->pending) targets.push_back(s.get());
  }
  // Rule 1: a tensor updated in place, whose alias source the program reads, that no other
  // tensor holds, and whose output no one else can claim, must be donated.
  if (engine_) {
    for (int slot = 0; slot < kSlots; ++slot) {
      if (!has(slot)) continue;
      OStorage* s = O(slot).st.get();
      if (!s->pending || !s->buf || oracle.is_pinned(s->buf) || s->expr.pass_buf || !s->expr.deps.count(s->buf)) continue;
      if (s->flagged) continue;  // its donation is the user's (rule 3)
      if (!opt_.strict && flagged_sizes.count(numel_of(s->shape) * static_cast<int64_t>(dtype_size(s->dtype)))) continue;
      if (std::any_of(must.begin(), must.end(), [&](const Must& m) { return m.es == ls[slot].impl()->storage().get(); })) continue;
      auto h = oracle.holders(s->buf);
      if (h.size() != 1 || h[0] != s) continue;
      bool shared = false;
      for (auto& t : live) {
        if (t.get() == s || !t->pending) continue;
        if (t->expr.node == s->expr.node || t->expr.pass_buf == s->buf) shared = true;
      }
      if (shared) continue;
      Storage* es = ls[slot].impl()->storage().get();
      if (!es->data()) continue;  // reported by model checks
      must.push_back({slot, es, es->data()->id()});
    }
  }
  if (emit_line) emit("mark_step();");
  stats.mark_steps++;
  if (!eng("mark_step()", [] { mark_step(); })) return;
  sync_common(targets, "mark_step", true);
  if (failure.failed || !engine_) return;
  StepReport r = last_step();
  for (const Must& m : must) {
    stats.must_donate_checks++;
    emit("EXPECT_TRUE(donated_in_place(" + T(m.slot) + "));");
    const ParamReport* p = nullptr;
    for (const auto& q : r.params) {
      if (q.buffer_id == m.buf_id) p = &q;
    }
    std::string why;
    if (!p) {
      why = "its buffer is not a parameter";
    } else if (!p->donated) {
      why = std::string("kept: ") + alias_reason_name(p->reason) + " (" + p->detail + ")";
    } else if (p->reason != AliasReason::InPlaceUpdate) {
      why = std::string("donated for the wrong reason: ") + alias_reason_name(p->reason);
    } else if (p->output_tensor_id != m.es->id()) {
      why = "donated to tensor " + std::to_string(p->output_tensor_id) + " instead of " + std::to_string(m.es->id());
    } else if (!m.es->data() || m.es->data()->id() != m.buf_id) {
      why = "reported donated, but the tensor does not hold the donated buffer afterwards (rule 5)";
    }
    if (!why.empty()) {
      fail("donation-missing", T(m.slot) + " was updated in place, nothing else holds or reads its buffer " +
                                   std::to_string(m.buf_id) + ", yet: " + why + "\n" + r.to_string());
      return;
    }
  }
  model_checks(true);
  if (!failure.failed) read_back_all();
}

void Runner::new_result(int d, const Dense& value, const Expr& e, Tensor l, const std::string& cpp) {
  emit(T(d) + " = " + cpp + ";");
  set_dst(d, oracle.pending_new(value, e), std::move(l));
  check_meta(d, cpp);
}

// An in-place update of slot a's window (and through it, its base).
void Runner::inplace(int a, const Dense& value, const Expr& e, const std::function<void(Tensor&)>& f,
                     const std::string& cpp, std::initializer_list<int> reads) {
  bool donated = any_donated(reads) || O(a).st->donated;
  if (donated || O(a).expanded()) {
    expect_error(cpp, [&] { f(ls[a]); }, donated && O(a).expanded() ? "" : donated ? "donated" : "expanded");
    return;
  }
  emit(cpp + ";");
  if (!eng(cpp, [&] { f(ls[a]); })) return;
  oracle.assign(O(a), value, e);
}

void Runner::step(const Ins& in, size_t index) {
  index_ = index;
  Res r = resolve(in);
  if (!r.ok) {
    stats.skipped++;
    return;
  }
  stats.executed++;
  const int a = in.a, b = in.b, d = in.d;
  auto skip = [&] {
    stats.executed--;
    stats.skipped++;
  };
  switch (in.k) {
    case K::Const: {
      Dense v{in.shape, kFloat32, in.vals};
      std::string cpp = "tensor<float>(" + vals_cpp(in.vals, kFloat32) + ", Shape" + shape_cpp(in.shape) + ")";
      emit(T(d) + " = " + cpp + ";");
      Tensor l;
      if (!eng(cpp, [&] { l = tensor<float>(std::vector<float>(in.vals.begin(), in.vals.end()), in.shape); })) return;
      set_dst(d, oracle.materialized(v), l);
      check_meta(d, cpp);
      break;
    }
    case K::Full: {
      Dense v{in.shape, kFloat32, std::vector<double>(numel_of(in.shape), in.s0)};
      std::string cpp = "full(Shape" + shape_cpp(in.shape) + ", " + lit(in.s0) + ", kFloat32)";
      Tensor l;
      if (!eng(cpp, [&] { l = full(in.shape, in.s0, kFloat32); })) return;
      new_result(d, v, oracle.fresh_expr({}), l, cpp);
      break;
    }
    case K::Arange: {
      int64_t n = numel_of(in.shape);
      Dense v{{n}, kFloat32, {}};
      for (int64_t i = 0; i < n; ++i) v.v.push_back(static_cast<double>(i));
      std::string cpp = "arange(0, " + std::to_string(n) + ", 1, kFloat32).reshape(" + list_cpp(in.shape) + ")";
      emit(T(d) + " = " + cpp + ";");
      Tensor l;
      if (!eng(cpp, [&] { l = arange(0, n, 1, kFloat32).reshape(in.shape); })) return;
      OTensor base = oracle.pending_new(v, oracle.fresh_expr({}));
      set_dst(d, oracle.view(base, in.shape, contiguous_strides_of(in.shape), 0), l);
      check_meta(d, cpp);
      break;
    }
    case K::ScalarT: {
      std::string cpp = "scalar_tensor(" + lit(in.s0) + ", kFloat32)";
      emit(T(d) + " = " + cpp + ";");
      Tensor l;
      if (!eng(cpp, [&] { l = scalar_tensor(in.s0, kFloat32); })) return;
      set_dst(d, oracle.pinned_scalar(in.s0), l);
      check_meta(d, cpp);
      break;
    }
    case K::Unary: {
      std::string cpp = cpp_unary(in.op, T(a), false);
      if (any_donated({a})) {
        expect_error(cpp, [&] { (void)eng_unary(in.op, ls[a]); }, "donated");
        break;
      }
      Dense v = oracle_unary(in.op, oracle.read(O(a)));
      if (!v.bounded(kBound)) return skip();
      Expr e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = eng_unary(in.op, ls[a]); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::UnaryI: {
      std::string cpp = cpp_unary(in.op, T(a), true);
      Dense v;
      Expr e;
      if (!O(a).st->donated) {
        v = oracle_unary(in.op, oracle.read(O(a)));
        if (!v.bounded(kBound)) return skip();
        e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      }
      inplace(a, v, e, [&](Tensor& t) { eng_unary_(in.op, t); }, cpp, {a});
      break;
    }
    case K::Binary: {
      std::string cpp = cpp_binary(in.op, T(a), T(b), in.s0, false);
      if (any_donated({a, b})) {
        expect_error(cpp, [&] { (void)eng_binary(in.op, ls[a], ls[b], in.s0); }, "donated");
        break;
      }
      Dense v = oracle_binary(in.op, oracle.read(O(a)), oracle.read(O(b)), in.s0, opt_.oracle_bug);
      if (!v.bounded(kBound)) return skip();
      Expr e = oracle.fresh_expr(Oracle::deps_union({oracle.value_expr(O(a)), oracle.value_expr(O(b))}));
      Tensor l;
      if (!eng(cpp, [&] { l = eng_binary(in.op, ls[a], ls[b], in.s0); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::BinaryI: {
      std::string cpp = cpp_binary(in.op, T(a), T(b), in.s0, true);
      Dense v;
      Expr e;
      if (!any_donated({a, b})) {
        v = oracle_binary(in.op, oracle.read(O(a)), oracle.read(O(b)), in.s0, false);
        if (!v.bounded(kBound)) return skip();
        e = oracle.fresh_expr(Oracle::deps_union({oracle.value_expr(O(a)), oracle.value_expr(O(b))}));
      }
      inplace(a, v, e, [&](Tensor& t) { eng_binary_(in.op, t, ls[b], in.s0); }, cpp, {a, b});
      break;
    }
    case K::BinS: {
      std::string cpp = cpp_bins(in.op, T(a), in.s0, false);
      if (any_donated({a})) {
        expect_error(cpp, [&] { (void)eng_bins(in.op, ls[a], in.s0); }, "donated");
        break;
      }
      Dense v = oracle_bins(in.op, oracle.read(O(a)), in.s0);
      if (!v.bounded(kBound)) return skip();
      Expr e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = eng_bins(in.op, ls[a], in.s0); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::BinSI: {
      std::string cpp = cpp_bins(in.op, T(a), in.s0, true);
      Dense v;
      Expr e;
      if (!O(a).st->donated) {
        if (in.op == 4) {
          v = oracle_bins(0, map1(oracle.read(O(a)), f_neg), in.s0);
        } else {
          v = oracle_bins(in.op, oracle.read(O(a)), in.s0);
        }
        if (!v.bounded(kBound)) return skip();
        e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      }
      inplace(a, v, e, [&](Tensor& t) { eng_bins_(in.op, t, in.s0); }, cpp, {a});
      break;
    }
    case K::Clamp:
    case K::ClampI: {
      bool ip = in.k == K::ClampI;
      std::string cpp = T(a) + (ip ? ".clamp_(Scalar(" : ".clamp(Scalar(") + lit(in.s0) + "), Scalar(" + lit(in.s1) + "))";
      Dense v;
      Expr e;
      if (!O(a).st->donated) {
        v = oracle.read(O(a));
        double lo = round_to(in.s0, v.dtype), hi = round_to(in.s1, v.dtype);
        for (double& x : v.v) x = std::min(std::max(x, lo), hi);
        e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      }
      if (ip) {
        inplace(a, v, e, [&](Tensor& t) { t.clamp_(Scalar(in.s0), Scalar(in.s1)); }, cpp, {a});
      } else if (O(a).st->donated) {
        expect_error(cpp, [&] { (void)ls[a].clamp(Scalar(in.s0), Scalar(in.s1)); }, "donated");
      } else {
        Tensor l;
        if (!eng(cpp, [&] { l = ls[a].clamp(Scalar(in.s0), Scalar(in.s1)); })) return;
        new_result(d, v, e, l, cpp);
      }
      break;
    }
    case K::Reduce: {
      bool keep = in.i1 & 1;
      std::string cpp = T(a) + "." + kReduce[in.op] + "(" + list_cpp(r.dims) + ", " + (keep ? "true" : "false") + ")";
      auto f = [&, keep](const Tensor& t) {
        switch (in.op) {
          case 0: return t.sum(r.dims, keep);
          case 1: return t.mean(r.dims, keep);
          case 2: return t.amax(r.dims, keep);
          case 3: return t.amin(r.dims, keep);
          default: return t.logsumexp(r.dims, keep);
        }
      };
      if (any_donated({a})) {
        expect_error(cpp, [&] { (void)f(ls[a]); }, "donated");
        break;
      }
      Dense v = reduce(oracle.read(O(a)), in.op, r.dims, keep);
      if (!v.bounded(kBound)) return skip();
      Expr e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = f(ls[a]); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::Softmax: {
      std::string cpp = T(a) + ".softmax(" + std::to_string(r.dim) + ")";
      if (any_donated({a})) {
        expect_error(cpp, [&] { (void)ls[a].softmax(r.dim); }, "donated");
        break;
      }
      Dense v = softmax(oracle.read(O(a)), r.dim);
      Expr e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = ls[a].softmax(r.dim); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::Matmul: {
      std::string cpp = "matmul(" + T(a) + ", " + T(b) + ")";
      // op 1-3: the product updates d in place (add_, sub_ with alpha, copy_ of product - d): the
      // accumulating-GEMM epilogues of the cpu backend.
      if (in.op != 0 && has(d) && O(a).rank() == 2 && O(b).rank() == 2 &&
          O(d).sizes == Shape{O(a).sizes[0], O(b).sizes[1]} && O(d).st->dtype == kFloat32 &&
          O(a).st->dtype == kFloat32) {
        const int op = in.op;
        const double alpha = in.s0;
        std::string icpp = op == 1   ? T(d) + ".add_(" + cpp + ")"
                           : op == 2 ? T(d) + ".sub_(" + cpp + ", " + lit(alpha) + ")"
                                     : T(d) + ".copy_(" + cpp + ".sub(" + T(d) + "))";
        Dense v;
        Expr e;
        if (!any_donated({a, b, d})) {
          Dense prod = matmul(oracle.read(O(a)), oracle.read(O(b))), old = oracle.read(O(d));
          v = op == 1   ? oracle_binary(0, old, prod, 0, false)
              : op == 2 ? oracle_binary(4, old, prod, alpha, false)
                        : oracle_binary(1, prod, old, 0, false);
          if (!v.bounded(kBound)) return skip();
          e = oracle.fresh_expr(Oracle::deps_union(
              {oracle.value_expr(O(a)), oracle.value_expr(O(b)), oracle.value_expr(O(d))}));
        }
        inplace(d, v, e,
                [&](Tensor& t) {
                  Tensor prod = matmul(ls[a], ls[b]);
                  if (op == 1) {
                    t.add_(prod);
                  } else if (op == 2) {
                    t.sub_(prod, alpha);
                  } else {
                    t.copy_(prod.sub(t));
                  }
                },
                icpp, {a, b, d});
        break;
      }
      if (any_donated({a, b})) {
        expect_error(cpp, [&] { (void)matmul(ls[a], ls[b]); }, "donated");
        break;
      }
      Dense v = matmul(oracle.read(O(a)), oracle.read(O(b)));
      if (!v.bounded(kBound)) return skip();
      Expr e = oracle.fresh_expr(Oracle::deps_union({oracle.value_expr(O(a)), oracle.value_expr(O(b))}));
      Tensor l;
      if (!eng(cpp, [&] { l = matmul(ls[a], ls[b]); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::Where: {
      std::string cpp = "where(" + T(a) + ".gt(" + T(b) + "), " + T(a) + ", " + T(b) + ")";
      if (any_donated({a, b})) {
        expect_error(cpp, [&] { (void)where(ls[a].gt(ls[b]), ls[a], ls[b]); }, "donated");
        break;
      }
      Dense x = oracle.read(O(a)), y = oracle.read(O(b));
      Dtype rt = result_dtype(x.dtype, x.shape.empty(), y.dtype, y.shape.empty());
      Dense v = dense_binary(x, y, rt, [](double p, double q) { return p > q ? p : q; });
      Expr e = oracle.fresh_expr(Oracle::deps_union({oracle.value_expr(O(a)), oracle.value_expr(O(b))}));
      Tensor l;
      if (!eng(cpp, [&] { l = where(ls[a].gt(ls[b]), ls[a], ls[b]); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::Select:
    case K::Slice:
    case K::Transpose:
    case K::Unsqueeze:
    case K::Expand:
    case K::Permute: {
      const OTensor& x = O(a);
      Shape sz = x.sizes, st = x.strides;
      int64_t off = x.offset;
      std::string cpp;
      std::function<Tensor(const Tensor&)> f;
      switch (in.k) {
        case K::Select:
          off += r.idx * st[r.dim];
          sz.erase(sz.begin() + r.dim);
          st.erase(st.begin() + r.dim);
          cpp = T(a) + ".select(" + std::to_string(r.dim) + ", " + std::to_string(r.idx) + ")";
          f = [r](const Tensor& t) { return t.select(r.dim, r.idx); };
          break;
        case K::Slice:
          off += r.start * st[r.dim];
          sz[r.dim] = (r.end - r.start + r.step - 1) / r.step;
          st[r.dim] *= r.step;
          cpp = T(a) + ".slice(" + std::to_string(r.dim) + ", " + std::to_string(r.start) + ", " +
                std::to_string(r.end) + ", " + std::to_string(r.step) + ")";
          f = [r](const Tensor& t) { return t.slice(r.dim, r.start, r.end, r.step); };
          break;
        case K::Transpose:
          std::swap(sz[r.d0], sz[r.d1]);
          std::swap(st[r.d0], st[r.d1]);
          cpp = T(a) + ".transpose(" + std::to_string(r.d0) + ", " + std::to_string(r.d1) + ")";
          f = [r](const Tensor& t) { return t.transpose(r.d0, r.d1); };
          break;
        case K::Unsqueeze: {
          int64_t s = r.dim < x.rank() ? sz[r.dim] * st[r.dim] : 1;
          sz.insert(sz.begin() + r.dim, 1);
          st.insert(st.begin() + r.dim, s);
          cpp = T(a) + ".unsqueeze(" + std::to_string(r.dim) + ")";
          f = [r](const Tensor& t) { return t.unsqueeze(r.dim); };
          break;
        }
        case K::Expand: {
          size_t lead = r.shape.size() - x.sizes.size();
          Shape nst(r.shape.size(), 0);
          for (size_t i = lead; i < r.shape.size(); ++i) {
            nst[i] = x.sizes[i - lead] == r.shape[i] ? x.strides[i - lead] : 0;
          }
          sz = r.shape;
          st = nst;
          cpp = T(a) + ".expand(" + list_cpp(r.shape) + ")";
          f = [r](const Tensor& t) { return t.expand(r.shape); };
          break;
        }
        default: {
          Shape ns, nst;
          for (int64_t p : r.dims) {
            ns.push_back(x.sizes[p]);
            nst.push_back(x.strides[p]);
          }
          sz = ns;
          st = nst;
          cpp = T(a) + ".permute(" + list_cpp(r.dims) + ")";
          f = [r](const Tensor& t) { return t.permute(r.dims); };
        }
      }
      emit(T(d) + " = " + cpp + ";");
      Tensor l;
      if (!eng(cpp, [&] { l = f(ls[a]); })) return;
      OTensor v = oracle.view(x, sz, st, off);
      set_dst(d, v, l);
      check_meta(d, cpp);
      break;
    }
    case K::Reshape:
    case K::View: {
      const OTensor& x = O(a);
      auto st = view_strides(x.sizes, x.strides, r.shape);
      bool is_view_op = in.k == K::View;
      std::string cpp = T(a) + (is_view_op ? ".view(" : ".reshape(") + list_cpp(r.shape) + ")";
      if (st) {
        emit(T(d) + " = " + cpp + ";");
        Tensor l;
        if (!eng(cpp, [&] { l = is_view_op ? ls[a].view(r.shape) : ls[a].reshape(r.shape); })) return;
        OTensor v = oracle.view(x, r.shape, *st, x.offset);
        set_dst(d, v, l);
        check_meta(d, cpp);
      } else if (is_view_op) {
        expect_error(cpp, [&] { (void)ls[a].view(r.shape); }, "[view]");
      } else if (x.st->donated) {
        expect_error(cpp, [&] { (void)ls[a].reshape(r.shape); }, "donated");
      } else {
        Dense v = oracle.read(x);
        v.shape = r.shape;
        Expr e = oracle.fresh_expr(oracle.value_expr(x).deps);
        Tensor l;
        if (!eng(cpp, [&] { l = ls[a].reshape(r.shape); })) return;
        new_result(d, v, e, l, cpp);
      }
      break;
    }
    case K::Clone: {
      std::string cpp = T(a) + ".clone()";
      const OTensor& x = O(a);
      if (x.st->donated) {
        expect_error(cpp, [&] { (void)ls[a].clone(); }, "donated");
        break;
      }
      Dense v = oracle.read(x);
      Tensor l;
      if (x.identity() && !x.st->pending) {
        emit(T(d) + " = " + cpp + ";");
        if (!eng(cpp, [&] { l = ls[a].clone(); })) return;
        int64_t buf = x.st->buf;
        set_dst(d, oracle.materialized_sharing(v, buf), l);
        check_meta(d, cpp);
      } else {
        Expr e = oracle.value_expr(x);
        if (!eng(cpp, [&] { l = ls[a].clone(); })) return;
        new_result(d, v, e, l, cpp);
      }
      break;
    }
    case K::Contig: {
      std::string cpp = T(a) + ".contiguous()";
      const OTensor& x = O(a);
      if (x.contiguous()) {
        emit(T(d) + " = " + cpp + ";");
        Tensor l;
        if (!eng(cpp, [&] { l = ls[a].contiguous(); })) return;
        OTensor v = x;
        set_dst(d, v, l);
        check_meta(d, cpp);
        if (engine_ && !failure.failed && ls[d].impl() != ls[a].impl()) {
          fail("metadata", "contiguous() of a contiguous tensor should return the same tensor");
        }
      } else if (x.st->donated) {
        expect_error(cpp, [&] { (void)ls[a].contiguous(); }, "donated");
      } else {
        Dense v = oracle.read(x);
        Expr e = oracle.value_expr(x);
        Tensor l;
        if (!eng(cpp, [&] { l = ls[a].contiguous(); })) return;
        new_result(d, v, e, l, cpp);
      }
      break;
    }
    case K::To: {
      std::string cpp = T(a) + ".to(" + (r.dtype == kFloat32 ? "kFloat32" : "kFloat64") + ")";
      const OTensor& x = O(a);
      if (x.st->donated) {
        expect_error(cpp, [&] { (void)ls[a].to(r.dtype); }, "donated");
        break;
      }
      Dense v = oracle.read(x);
      v.dtype = r.dtype;
      v = round_dense(v);
      Expr e = r.dtype == x.st->dtype ? oracle.value_expr(x) : oracle.fresh_expr(oracle.value_expr(x).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = ls[a].to(r.dtype); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::Dup: {
      emit(T(d) + " = " + T(a) + ";");
      OTensor v = O(a);
      Tensor l = ls[a];
      set_dst(d, v, l);
      break;
    }
    case K::Drop:
      emit(T(a) + " = Tensor();");
      os[a].reset();
      ls[a] = Tensor();
      break;
    case K::Copy: {
      std::string cpp = T(a) + ".copy_(" + T(b) + ")";
      Dense v;
      Expr e;
      if (!any_donated({a, b})) {
        Dense src = oracle.read(O(b));
        v = broadcast_to(src, O(a).sizes);
        v.dtype = O(a).st->dtype;
        v = round_dense(v);
        Expr se = oracle.value_expr(O(b));
        e = (O(b).sizes == O(a).sizes && O(b).st->dtype == O(a).st->dtype) ? se : oracle.fresh_expr(se.deps);
      }
      inplace(a, v, e, [&](Tensor& t) { t.copy_(ls[b]); }, cpp, {a, b});
      break;
    }
    case K::Fill: {
      std::string cpp = T(a) + ".fill_(" + lit(in.s0) + ")";
      Dense v{O(a).sizes, O(a).st->dtype, std::vector<double>(numel_of(O(a).sizes), in.s0)};
      inplace(a, v, oracle.fresh_expr({}), [&](Tensor& t) { t.fill_(in.s0); }, cpp, {a});
      break;
    }
    case K::MaskedFill: {
      std::string cpp = T(a) + ".masked_fill_(" + T(b) + ".gt(0), " + lit(in.s0) + ")";
      Dense v;
      Expr e;
      if (!any_donated({a, b})) {
        v = oracle.read(O(a));
        Dense m = broadcast_to(oracle.read(O(b)), O(a).sizes);
        double sv = round_to(in.s0, v.dtype);
        for (size_t i = 0; i < v.v.size(); ++i) {
          if (m.v[i] > 0) v.v[i] = sv;
        }
        e = oracle.fresh_expr(Oracle::deps_union({oracle.value_expr(O(a)), oracle.value_expr(O(b))}));
      }
      inplace(a, v, e, [&](Tensor& t) { t.masked_fill_(ls[b].gt(0), in.s0); }, cpp, {a, b});
      break;
    }
    case K::IndexSelect: {
      std::string cpp = T(a) + ".index_select(" + std::to_string(r.dim) + ", tensor<int64_t>(" + list_cpp(r.ilist) + "))";
      auto f = [&] { return ls[a].index_select(r.dim, tensor<int64_t>(r.ilist)); };
      if (any_donated({a})) {
        expect_error(cpp, [&] { (void)f(); }, "donated");
        break;
      }
      Dense v = index_select(oracle.read(O(a)), r.dim, r.ilist);
      Expr e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      Tensor l;
      if (!eng(cpp, [&] { l = f(); })) return;
      new_result(d, v, e, l, cpp);
      break;
    }
    case K::IndexCopy: {
      std::string cpp = T(a) + ".index_copy_(" + std::to_string(r.dim) + ", tensor<int64_t>(" + list_cpp(r.ilist) +
                        "), " + T(a) + ".index_select(" + std::to_string(r.dim) + ", tensor<int64_t>(" +
                        list_cpp(r.ilist2) + ")).mul(" + lit(in.s0) + "))";
      Dense v;
      Expr e;
      if (!O(a).st->donated) {
        Dense cur = oracle.read(O(a));
        Dense src = oracle_bins(2, index_select(cur, r.dim, r.ilist2), in.s0);
        if (!src.bounded(kBound)) return skip();
        v = cur;
        Shape cst = contiguous_strides_of(cur.shape);
        Shape pos(src.shape.size(), 0);
        for (int64_t k = 0; k < numel_of(src.shape); ++k) {
          int64_t off = 0;
          for (size_t dd = 0; dd < pos.size(); ++dd) {
            off += (static_cast<int64_t>(dd) == r.dim ? r.ilist[pos[dd]] : pos[dd]) * cst[dd];
          }
          v.v[off] = src.v[k];
          for (size_t dd = pos.size(); dd-- > 0;) {
            if (++pos[dd] < src.shape[dd]) break;
            pos[dd] = 0;
          }
        }
        e = oracle.fresh_expr(oracle.value_expr(O(a)).deps);
      }
      inplace(a, v, e,
              [&](Tensor& t) {
                t.index_copy_(r.dim, tensor<int64_t>(r.ilist),
                              t.index_select(r.dim, tensor<int64_t>(r.ilist2)).mul(in.s0));
              },
              cpp, {a});
      break;
    }
    case K::Donate:
    case K::Undonate: {
      bool on = in.k == K::Donate;
      OStorage& s = *O(a).st;
      bool want = on && !s.donated && !s.pending && s.buf && O(a).identity();
      emit("EXPECT_EQ(set_buffer_donation(" + T(a) + ", " + (on ? "true" : "false") + "), " + (want ? "true" : "false") + ");");
      bool got = false;
      if (!eng("set_buffer_donation", [&] { got = set_buffer_donation(ls[a], on); })) return;
      if (engine_ && got != want) {
        fail("return-value", "set_buffer_donation(" + T(a) + ", " + (on ? "true" : "false") + ") returned " +
                                 (got ? "true" : "false"));
        return;
      }
      if (want) s.flagged = true;
      if (!on) s.flagged = false;
      break;
    }
    case K::Read: {
      const OTensor& x = O(a);
      bool use_item = numel_of(x.sizes) == 1 && (in.i0 & 1);
      std::string cpp = use_item ? T(a) + ".item<double>()" : T(a) + ".to_vector<double>()";
      if (x.st->donated) {
        expect_error(cpp, [&] {
          if (use_item) (void)ls[a].item<double>(); else (void)ls[a].to_vector<double>();
        }, "donated");
        break;
      }
      Dense want = oracle.read(x);
      bool was_pending = x.st->pending;
      std::shared_ptr<OStorage> keep = x.st;
      std::vector<double> got;
      if (!eng(cpp, [&] {
            if (use_item) got = {ls[a].item<double>()}; else got = ls[a].to_vector<double>();
          })) {
        emit("(void)" + cpp + ";");
        return;
      }
      compare(a, got, want, use_item ? "std::vector<double>{" + cpp + "}" : cpp, true);
      if (was_pending) sync_common({keep.get()}, "read", true);
      break;
    }
    case K::Sync: {
      std::string cpp = "sync({";
      std::vector<Tensor> ts;
      std::vector<OStorage*> targets;
      bool donated = false;
      bool any_pending = false;
      for (size_t i = 0; i < r.slots.size(); ++i) {
        cpp += (i ? ", " : "") + T(r.slots[i]);
        ts.push_back(ls[r.slots[i]]);
        targets.push_back(O(r.slots[i]).st.get());
        donated |= O(r.slots[i]).st->donated;
        any_pending |= O(r.slots[i]).st->pending;
      }
      cpp += "})";
      if (donated) {
        expect_error(cpp, [&] { sync(ts); }, "donated");
        break;
      }
      emit(cpp + ";");
      if (!eng(cpp, [&] { sync(ts); })) return;
      sync_common(targets, "sync", true);
      (void)any_pending;
      break;
    }
    case K::MarkStep:
      do_mark_step(true);
      break;
    default:
      break;
  }
  model_checks(false);
}

void Runner::finish(size_t index) {
  index_ = index;
  if (failure.failed) return;
  do_mark_step(true);
}

}  // namespace

// ---- public entry points ----

const char* kind_name(K k) {
  static const char* names[] = {"Const", "Full", "Arange", "ScalarT", "Unary", "UnaryI", "Binary", "BinaryI",
                                "BinS", "BinSI", "Clamp", "ClampI", "Reduce", "Softmax", "Matmul", "Where",
                                "Select", "Slice", "Transpose", "Reshape", "View", "Unsqueeze", "Expand",
                                "Permute", "Clone", "Contig", "To", "Dup", "Drop", "Copy", "Fill", "MaskedFill",
                                "IndexSelect", "IndexCopy", "Donate", "Undonate", "Read", "Sync", "MarkStep"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(K::kCount));
  return names[static_cast<int>(k)];
}

std::string describe(const Ins& in) {
  std::ostringstream o;
  o << kind_name(in.k) << " d=" << in.d << " a=" << in.a << " b=" << in.b << " op=" << in.op << " i=" << in.i0
    << "," << in.i1 << "," << in.i2 << "," << in.i3 << " s=" << in.s0 << "," << in.s1;
  if (!in.shape.empty()) o << " shape=" << shape_cpp(in.shape);
  return o.str();
}

void Stats::add(const Stats& o) {
  executed += o.executed;
  skipped += o.skipped;
  expected_errors += o.expected_errors;
  reads += o.reads;
  values_compared += o.values_compared;
  syncs += o.syncs;
  mark_steps += o.mark_steps;
  inplace_donations += o.inplace_donations;
  user_donations += o.user_donations;
  must_donate_checks += o.must_donate_checks;
  cache_hits += o.cache_hits;
  for (int i = 0; i < 16; ++i) reasons[i] += o.reasons[i];
}

uint64_t case_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

// A scoped value of an environment variable (restored, or unset, on exit).
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value, 1);
  }
  ~EnvOverride() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The program at the quick tier, then at the full tier: every read must be bitwise the same.
RunResult run_tiers(const Program& p, RunOptions opt) {
  opt.tiers = false;
  opt.backend = "cpu";
  EnvOverride no_cache("LAZYX_CACHE_DIR", "");  // compile every kernel here, at both tiers
  RunResult quick = run(p, opt);
  if (quick.failure.failed) return quick;
  RunResult full;
  {
    EnvOverride tiered("LAZYX_CPU_TIERED", "0");
    full = run(p, opt);
  }
  if (full.failure.failed) return full;
  for (size_t r = 0; r < quick.reads.size(); ++r) {
    const std::vector<double>& a = quick.reads[r];
    const std::vector<double>* b = r < full.reads.size() ? &full.reads[r] : nullptr;
    size_t i = 0;
    if (b && a.size() == b->size()) {
      while (i < a.size() && std::memcmp(&a[i], &(*b)[i], sizeof(double)) == 0) ++i;
      if (i == a.size()) continue;
    }
    char m[200];
    std::snprintf(
        m, sizeof m,
        "read %zu differs between the quick and the full tier at element %zu: %.17g and %.17g", r,
        i, i < a.size() ? a[i] : NAN, b && i < b->size() ? (*b)[i] : NAN);
    quick.failure = {true, "tiers", m, p.size()};
    return quick;
  }
  if (quick.reads.size() != full.reads.size()) {
    quick.failure = {true, "tiers", "the full tier read more values than the quick tier", p.size()};
  }
  return quick;
}

}  // namespace

RunResult run(const Program& p, const RunOptions& opt) {
  if (opt.tiers) return run_tiers(p, opt);
  RunResult res;
  set_backend(opt.backend);
  set_backend_alive(true);
  mark_step();  // nothing pending from before
  if (!opt.keep_cache) clear_program_cache();
  {
    Runner r(opt, true);
    for (size_t i = 0; i < p.size() && !r.failure.failed; ++i) r.step(p[i], i);
    r.finish(p.size());
    res.failure = r.failure;
    res.stats = r.stats;
    res.code = std::move(r.code);
    res.reads = std::move(r.reads);
    r.clear();
  }
  try {
    mark_step();
  } catch (const Error&) {
  }
  return res;
}

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0) < p; }
  double scalar() { return kScalars[below(sizeof(kScalars) / sizeof(kScalars[0]))]; }
};

// Weights of the instruction kinds.
const std::pair<K, int> kWeights[] = {
    {K::Const, 6},   {K::Full, 2},      {K::Arange, 2},    {K::ScalarT, 1},   {K::Unary, 3},
    {K::UnaryI, 5},  {K::Binary, 4},    {K::BinaryI, 9},   {K::BinS, 3},      {K::BinSI, 9},
    {K::Clamp, 1},   {K::ClampI, 2},    {K::Reduce, 3},    {K::Softmax, 1},   {K::Matmul, 2},
    {K::Where, 1},   {K::Select, 4},    {K::Slice, 4},     {K::Transpose, 2}, {K::Reshape, 2},
    {K::View, 1},    {K::Unsqueeze, 1}, {K::Expand, 1},    {K::Permute, 1},   {K::Clone, 3},
    {K::Contig, 1},  {K::To, 1},        {K::Dup, 1},       {K::Drop, 3},      {K::Copy, 3},
    {K::Fill, 1},    {K::MaskedFill, 2}, {K::IndexSelect, 1}, {K::IndexCopy, 2}, {K::Donate, 3},
    {K::Undonate, 1}, {K::Read, 5},     {K::Sync, 2},      {K::MarkStep, 7},
};

K pick_kind(Rng& r) {
  int total = 0;
  for (auto& [k, w] : kWeights) total += w;
  int64_t x = r.below(total);
  for (auto& [k, w] : kWeights) {
    if (x < w) return k;
    x -= w;
  }
  return K::MarkStep;
}

Ins make_const(Rng& r, int d, const Shape& shape) {
  Ins in;
  in.k = K::Const;
  in.d = d;
  in.shape = shape;
  for (int64_t i = 0; i < numel_of(shape); ++i) in.vals.push_back(static_cast<double>(r.below(17) - 8) / 4.0);
  return in;
}

}  // namespace

Program generate(uint64_t seed, int min_len, int max_len) {
  Rng r{seed};
  RunOptions dry_opt;
  Runner dry(dry_opt, false);
  Program p;
  int len = min_len + static_cast<int>(r.below(std::max(1, max_len - min_len + 1)));
  size_t block_start = 0;
  auto push = [&](const Ins& in) {
    p.push_back(in);
    dry.step(in, p.size() - 1);
  };
  auto full_slots = [&] {
    std::vector<int> v;
    for (int s = 0; s < kSlots; ++s) {
      if (dry.has(s)) v.push_back(s);
    }
    return v;
  };
  auto dst_slot = [&] {
    if (r.chance(0.5)) {
      for (int s = 0; s < kSlots; ++s) {
        int c = static_cast<int>((s + r.below(kSlots)) % kSlots);
        if (!dry.has(c)) return c;
      }
    }
    return static_cast<int>(r.below(kSlots));
  };
  // A couple of materialized tensors to start from.
  int n0 = 2 + static_cast<int>(r.below(2));
  for (int i = 0; i < n0; ++i) push(make_const(r, dst_slot(), kShapes[r.below(kNumShapes)]));
  int guard = 0;
  while (static_cast<int>(p.size()) < len && guard++ < len * 20) {
    auto full = full_slots();
    if (full.size() < 2 && r.chance(0.7)) {
      push(make_const(r, dst_slot(), kShapes[r.below(kNumShapes)]));
      continue;
    }
    Ins in;
    in.k = pick_kind(r);
    in.d = dst_slot();
    in.a = full.empty() ? 0 : full[r.below(full.size())];
    in.b = full.empty() ? 0 : full[r.below(full.size())];
    in.i0 = r.below(64);
    in.i1 = r.below(64);
    in.i2 = r.below(64);
    in.i3 = r.below(64);
    in.s0 = r.scalar();
    in.s1 = r.scalar();
    if (in.s0 > in.s1) std::swap(in.s0, in.s1);
    switch (in.k) {
      case K::Unary: in.op = static_cast<int>(r.below(kNumUnary)); break;
      case K::UnaryI: in.op = static_cast<int>(r.below(kNumUnary - 1)); break;
      case K::Binary:
      case K::BinaryI: in.op = static_cast<int>(r.below(kNumBinary)); break;
      case K::BinS:
      case K::BinSI: in.op = static_cast<int>(r.below(kNumBinS)); break;
      case K::Reduce: in.op = static_cast<int>(r.below(5)); break;
      case K::Matmul:
        in.op = r.chance(0.5) ? 0 : 1 + static_cast<int>(r.below(3));
        break;
      case K::Const: in = make_const(r, in.d, kShapes[r.below(kNumShapes)]); break;
      case K::Full:
      case K::Arange: in.shape = kShapes[r.below(kNumShapes)]; break;
      case K::IndexSelect:
      case K::IndexCopy: {
        int n = 1 + static_cast<int>(r.below(4));
        for (int i = 0; i < n; ++i) in.vals.push_back(static_cast<double>(r.below(8)));
        break;
      }
      case K::Sync: in.i0 = 1 + r.below((1 << kSlots) - 1); break;
      default: break;
    }
    if (in.k == K::Clamp || in.k == K::ClampI) {
      if (in.s0 == in.s1) in.s1 = in.s0 + 1;
    }
    // Operands that fit: try other second operands, then create one of a fitting shape.
    if (!dry.valid(in) && (in.k == K::Binary || in.k == K::BinaryI || in.k == K::Where || in.k == K::Copy ||
                           in.k == K::MaskedFill || in.k == K::Matmul)) {
      for (int s : full) {
        in.b = s;
        if (dry.valid(in)) break;
      }
      if (!dry.valid(in) && dry.has(in.a) && r.chance(0.6)) {
        const OTensor& a = dry.O(in.a);
        Shape sh = a.sizes;
        if (in.k == K::Matmul) {
          if (a.rank() < 1 || a.rank() > 2) continue;
          sh = r.chance(0.5) ? Shape{a.sizes.back()} : Shape{a.sizes.back(), 1 + r.below(4)};
        } else if (!sh.empty() && r.chance(0.4)) {
          sh = {sh.back()};  // broadcast along the leading dims
        }
        int bs = dst_slot();
        if (bs == in.a) bs = (bs + 1) % kSlots;
        Ins c = make_const(r, bs, sh);
        if (a.st->dtype == kFloat64 && in.k == K::Matmul) continue;
        push(c);
        in.b = bs;
      }
    }
    if (!dry.valid(in)) continue;
    // An accumulating matmul updates d in place: give d the product's shape when it has another.
    if (in.k == K::Matmul && in.op != 0 && dry.O(in.a).rank() == 2 && dry.O(in.b).rank() == 2 &&
        dry.O(in.a).st->dtype == kFloat32) {
      Shape sh{dry.O(in.a).sizes[0], dry.O(in.b).sizes[1]};
      if (!dry.has(in.d) || dry.O(in.d).sizes != sh || dry.O(in.d).st->dtype != kFloat32) {
        int ds = in.d;
        for (int k = 0; k < kSlots && (ds == in.a || ds == in.b); ++k) ds = (ds + 1) % kSlots;
        push(make_const(r, ds, sh));
        in.d = ds;
      }
    }
    push(in);
    // Loop-like programs: repeat the block since the last step a few times.
    if (in.k == K::MarkStep) {
      size_t blen = p.size() - block_start;
      if (blen >= 2 && blen <= 16 && r.chance(0.3)) {
        Program block(p.begin() + block_start, p.end());
        int reps = 1 + static_cast<int>(r.below(3));
        for (int k = 0; k < reps; ++k) {
          for (const Ins& b : block) push(b);
        }
      }
      block_start = p.size();
    }
  }
  dry.clear();
  return p;
}

Program shrink(const Program& p0, const RunOptions& opt, const std::string& category, int max_runs) {
  Program p = p0;
  int runs = 0;
  RunOptions o = opt;
  o.emit = false;
  auto fails = [&](const Program& q) {
    runs++;
    RunResult r = run(q, o);
    return r.failure.failed && r.failure.category == category;
  };
  // Cut everything after the failing instruction first.
  {
    RunResult r = run(p, o);
    if (r.failure.failed && r.failure.at + 1 < p.size()) {
      Program q(p.begin(), p.begin() + static_cast<long>(r.failure.at + 1));
      if (fails(q)) p = q;
    }
  }
  size_t chunk = std::max<size_t>(1, p.size() / 2);
  while (runs < max_runs) {
    bool progress = false;
    for (size_t i = 0; i < p.size() && runs < max_runs;) {
      Program q;
      q.insert(q.end(), p.begin(), p.begin() + static_cast<long>(i));
      q.insert(q.end(), p.begin() + static_cast<long>(std::min(p.size(), i + chunk)), p.end());
      if (q.size() < p.size() && fails(q)) {
        p = q;
        progress = true;
      } else {
        i += chunk;
      }
    }
    if (!progress) {
      if (chunk == 1) break;
      chunk = std::max<size_t>(1, chunk / 2);
    }
  }
  // Simplify what is left: Const values to small integers where the failure survives.
  for (size_t i = 0; i < p.size() && runs < max_runs; ++i) {
    if (p[i].k != K::Const) continue;
    Program q = p;
    for (size_t j = 0; j < q[i].vals.size(); ++j) q[i].vals[j] = static_cast<double>(j % 5) + 1;
    if (fails(q)) p = q;
  }
  return p;
}

std::string emit_test(const Program& p, const RunOptions& opt, const std::string& test_name,
                      const std::string& comment) {
  RunOptions o = opt;
  o.emit = true;
  RunResult r = run(p, o);
  std::ostringstream s;
  s << "// " << comment << "\n";
  s << "// Paste into tests/test_fuzz_regressions.cpp (it includes lazyx/lazyx.h, tensor/tensor_impl.h\n";
  s << "// and <gtest/gtest.h>).\n";
  s << "TEST(FuzzRegression, " << test_name << ") {\n";
  s << "  using namespace lazyx;\n";
  // Every backend the build has: the case was found on one, and a build without it (the
  // sanitizer run has no JIT) still checks the others.
  s << "  // Found on the " << opt.backend << " backend.\n";
  s << "  for (const std::string& backend : backend_names()) {\n";
  s << "    SCOPED_TRACE(backend);\n";
  s << "    set_backend(backend);\n";
  s << "    mark_step();\n";
  s << "    clear_program_cache();\n";
  s << "    auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want) {\n";
  s << "      ASSERT_EQ(got.size(), want.size());\n";
  s << "      double scale = 0;\n";
  s << "      for (double w : want) scale = std::max(scale, std::fabs(w));\n";
  s << "      for (size_t i = 0; i < want.size(); ++i) {\n";
  s << "        EXPECT_NEAR(got[i], want[i], 1e-3 + 1e-4 * std::fabs(want[i]) + 1e-5 * scale) << \"element \" << i;\n";
  s << "      }\n";
  s << "    };\n";
  s << "    auto donated_in_place = [](const Tensor& t) {\n";
  s << "      StepReport r = last_step();\n";
  s << "      for (const auto& p : r.params) {\n";
  s << "        if (p.donated && p.reason == AliasReason::InPlaceUpdate &&\n";
  s << "            p.output_tensor_id == t.impl()->storage()->id()) return true;\n";
  s << "      }\n";
  s << "      return false;\n";
  s << "    };\n";
  s << "    (void)expect_values;\n";
  s << "    (void)donated_in_place;\n";
  s << "    Tensor t0, t1, t2, t3, t4, t5;\n";
  for (const std::string& line : r.code) s << "    " << line << "\n";
  s << "  }\n";
  s << "}\n";
  return s.str();
}

}  // namespace lazyx::fuzz
