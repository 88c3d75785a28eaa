// Elementwise ops: arithmetic, math, comparisons, logic, and the helpers every family uses.
#include <cstring>

#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;

namespace detail {

const Shape& Arg::shape() const {
  static const Shape kScalarShape{};
  return node ? node->shape() : kScalarShape;
}

Arg arg(const char* op, const Tensor& t) {
  const TensorImpl& i = impl_of(op, t);
  return Arg{i.value(op), i.dtype(), i.sizes().empty() ? 1 : 0, std::nullopt};
}

Arg arg(Scalar s) { return Arg{nullptr, s.default_dtype(), 2, s}; }

Dtype promote(std::initializer_list<Arg> args) {
  ir::PromotionInput in[4];
  size_t n = 0;
  for (const Arg& a : args) in[n++] = {a.dtype, a.kind};
  return ir::result_type(in, n);
}

namespace {
// Recent scalar nodes by dtype and value. One that no graph holds any more (the last step's
// graph is gone) is handed out again, so a cached step makes no node for its constants; one a
// graph still holds never is, so sharing cannot change a graph's structure. Callers hold the
// engine lock. Never freed: nodes must not outlive the node pool at exit.
struct ScalarCache {
  static constexpr size_t kSlots = 32;
  ir::NodePtr slot[kSlots];
};

ir::NodePtr cached_scalar(Dtype d, double f, int64_t i) {
  static ScalarCache* cache = new ScalarCache();
  uint64_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint64_t h = ir::hash_combine(bits ^ static_cast<uint64_t>(d), static_cast<uint64_t>(i));
  ir::NodePtr& n = cache->slot[h % ScalarCache::kSlots];
  if (n && n.use_count() == 1 && n->dtype() == d && n->scalar_i() == i) {
    const double g = n->scalar_f();
    if (std::memcmp(&f, &g, sizeof f) == 0) return n;  // bitwise: -0.0 and NaNs kept apart
  }
  n = ir::Node::scalar(d, f, i);
  return n;
}
}  // namespace

ir::NodePtr scalar_node(Scalar s, Dtype d) {
  double f = s.to_double();
  int64_t i = s.is_floating() ? static_cast<int64_t>(f) : s.to_int();
  return cached_scalar(d, f, i);
}

ir::NodePtr node_of(const Arg& a, Dtype d) { return a.node ? a.node : scalar_node(*a.scalar, d); }

ir::NodePtr cast(ir::NodePtr n, Dtype d) {
  if (n->dtype() == d) return n;
  Shape s = n->shape();
  return ir::make_node(Op::Cast, d, std::move(s), {std::move(n)});
}

ir::NodePtr reshape_node(ir::NodePtr n, const Shape& shape) {
  if (n->shape() == shape) return n;
  ir::Attrs a;
  a.ints = ir::contiguous_strides(shape);
  Dtype d = n->dtype();
  return ir::make_node(Op::AsStrided, d, shape, {std::move(n)}, std::move(a));
}

ir::NodePtr expand_node(ir::NodePtr n, const Shape& shape, Dtype d) {
  if (n->shape() == shape && n->dtype() == d) return n;
  return ir::make_node(Op::Cast, d, shape, {std::move(n)});
}

void check_dtype(const char* op, Dtype d, bool allow_bool, bool allow_int, bool allow_float) {
  bool ok = (d == kBool && allow_bool) || (is_integral(d) && allow_int) ||
            (is_floating(d) && allow_float);
  if (!ok) {
    ir::fail(op, std::string("dtype ") + dtype_name(d) + " is not supported by this op.");
  }
}

ir::NodePtr elementwise(Op op, const char* name, std::initializer_list<Arg> args,
                        std::optional<Dtype> out_dtype, ir::Attrs attrs) {
  Dtype rt = promote(args);
  const Arg* first = args.begin();
  Shape shape = first->shape();
  for (const Arg* a = first + 1; a != args.end(); ++a) {
    // A 0-dim argument (a scalar) broadcasts to any shape: no new shape to build.
    if (!a->shape().empty() && a->shape() != shape) {
      shape = ir::broadcast_shapes(name, shape, a->shape());
    }
  }
  ir::Operands ops;
  ops.resize(args.size());
  size_t k = 0;
  for (const Arg& a : args) ops.at(k++) = node_of(a, rt);
  if (out_dtype) attrs.i0 = static_cast<int64_t>(rt);  // the compute dtype of comparisons
  return ir::make_node(op, out_dtype.value_or(rt), std::move(shape), std::move(ops),
                       std::move(attrs));
}

Tensor& assign_inplace(const char* op, Tensor& self, ir::NodePtr value) {
  TensorImpl& impl = *self.impl();
  if (!can_cast(value->dtype(), impl.dtype())) {
    ir::fail(op, std::string("result type ") + dtype_name(value->dtype()) +
                     " can't be cast to the desired output type " + dtype_name(impl.dtype()) +
                     ".");
  }
  impl.assign(op, cast(std::move(value), impl.dtype()));
  return self;
}

}  // namespace detail

using namespace detail;

namespace {

Dtype float_result(Dtype d) { return is_floating(d) ? d : kFloat32; }

// other * alpha for a host scalar operand, keeping its kind (a bool stays a bool when alpha is 1).
Scalar scaled(Scalar o, Scalar alpha) {
  if (!alpha.is_floating() && alpha.to_int() == 1) return o;
  if (o.is_floating() || alpha.is_floating()) return Scalar(o.to_double() * alpha.to_double());
  return Scalar(static_cast<long long>(o.to_int() * alpha.to_int()));
}

// Arithmetic with alpha: a + alpha * b (Sub: a - alpha * b).
ir::NodePtr add_like(Op op, const char* name, const Arg& a, const Arg& b,
                     std::optional<Scalar> alpha) {
  Dtype rt = promote({a, b});
  if (rt == kBool && op == Op::Sub) {
    ir::fail(name, "subtracting bool tensors is not supported. Use logical_xor or ~ instead.");
  }
  if (alpha && alpha->is_floating() && !is_floating(rt)) {
    ir::fail(name, std::string("a floating-point alpha needs a floating-point result, not ") +
                       dtype_name(rt) + ".");
  }
  if (!alpha) return elementwise(op, name, {a, b});
  Shape shape = ir::broadcast_shapes(name, a.shape(), b.shape());
  return ir::make_node(op, rt, std::move(shape),
                       {node_of(a, rt), node_of(b, rt), scalar_node(*alpha, rt)});
}

ir::NodePtr div_node(const char* name, const Arg& a, const Arg& b) {
  Dtype rt = float_result(promote({a, b}));
  Shape shape = ir::broadcast_shapes(name, a.shape(), b.shape());
  return ir::make_node(Op::Div, rt, shape, {node_of(a, rt), node_of(b, rt)});
}

ir::NodePtr unary_float(Op op, const char* name, const Tensor& t) {
  Arg a = arg(name, t);
  Dtype d = float_result(a.dtype);
  return ir::make_node(op, d, a.shape(), {a.node});
}

ir::NodePtr unary_same(Op op, const char* name, const Tensor& t, bool allow_bool) {
  Arg a = arg(name, t);
  check_dtype(name, a.dtype, allow_bool, true, true);
  return ir::make_node(op, a.dtype, a.shape(), {a.node});
}

ir::NodePtr compare(Op op, const char* name, const Arg& a, const Arg& b) {
  return elementwise(op, name, {a, b}, kBool);
}

ir::NodePtr clamp_node(const char* name, const Tensor& x, std::optional<Scalar> lo,
                       std::optional<Scalar> hi) {
  if (!lo && !hi) ir::fail(name, "at least one of min and max must be given.");
  Arg a = arg(name, x);
  ir::NodePtr n = a.node;
  if (lo) n = elementwise(Op::Maximum, name, {Arg{n, n->dtype(), a.kind, std::nullopt}, arg(*lo)});
  if (hi) n = elementwise(Op::Minimum, name, {Arg{n, n->dtype(), a.kind, std::nullopt}, arg(*hi)});
  return n;
}

}  // namespace

#define LAZYX_LOCK EngineLock lock_(engine_mutex())

Tensor Tensor::add(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(add_like(Op::Add, "add", arg("add", *this), arg("add", o), std::nullopt));
}
Tensor Tensor::add(const Tensor& o, Scalar alpha) const {
  LAZYX_LOCK;
  return make_tensor(add_like(Op::Add, "add", arg("add", *this), arg("add", o), alpha));
}
Tensor Tensor::add(Scalar o, Scalar alpha) const {
  LAZYX_LOCK;
  Scalar v = scaled(o, alpha);
  return make_tensor(add_like(Op::Add, "add", arg("add", *this), arg(v), std::nullopt));
}
Tensor Tensor::sub(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(add_like(Op::Sub, "sub", arg("sub", *this), arg("sub", o), std::nullopt));
}
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const {
  LAZYX_LOCK;
  return make_tensor(add_like(Op::Sub, "sub", arg("sub", *this), arg("sub", o), alpha));
}
Tensor Tensor::sub(Scalar o, Scalar alpha) const {
  LAZYX_LOCK;
  Scalar v = scaled(o, alpha);
  return make_tensor(add_like(Op::Sub, "sub", arg("sub", *this), arg(v), std::nullopt));
}
Tensor Tensor::mul(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Mul, "mul", {arg("mul", *this), arg("mul", o)}));
}
Tensor Tensor::mul(Scalar o) const {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Mul, "mul", {arg("mul", *this), arg(o)}));
}
Tensor Tensor::div(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(div_node("div", arg("div", *this), arg("div", o)));
}
Tensor Tensor::div(Scalar o) const {
  LAZYX_LOCK;
  return make_tensor(div_node("div", arg("div", *this), arg(o)));
}
Tensor Tensor::pow(const Tensor& e) const {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Pow, "pow", {arg("pow", *this), arg("pow", e)}));
}
Tensor Tensor::pow(Scalar e) const {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Pow, "pow", {arg("pow", *this), arg(e)}));
}
Tensor Tensor::maximum(const Tensor& o) const { return lazyx::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return lazyx::minimum(*this, o); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  LAZYX_LOCK;
  return make_tensor(clamp_node("clamp", *this, lo, hi));
}

Tensor& Tensor::add_(const Tensor& o) {
  LAZYX_LOCK;
  return assign_inplace("add_", *this,
                        add_like(Op::Add, "add_", arg("add_", *this), arg("add_", o), std::nullopt));
}
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  LAZYX_LOCK;
  return assign_inplace("add_", *this,
                        add_like(Op::Add, "add_", arg("add_", *this), arg("add_", o), alpha));
}
Tensor& Tensor::add_(Scalar o, Scalar alpha) {
  LAZYX_LOCK;
  Scalar v = scaled(o, alpha);
  return assign_inplace("add_", *this,
                        add_like(Op::Add, "add_", arg("add_", *this), arg(v), std::nullopt));
}
Tensor& Tensor::sub_(const Tensor& o) {
  LAZYX_LOCK;
  return assign_inplace("sub_", *this,
                        add_like(Op::Sub, "sub_", arg("sub_", *this), arg("sub_", o), std::nullopt));
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  LAZYX_LOCK;
  return assign_inplace("sub_", *this,
                        add_like(Op::Sub, "sub_", arg("sub_", *this), arg("sub_", o), alpha));
}
Tensor& Tensor::sub_(Scalar o, Scalar alpha) {
  LAZYX_LOCK;
  Scalar v = scaled(o, alpha);
  return assign_inplace("sub_", *this,
                        add_like(Op::Sub, "sub_", arg("sub_", *this), arg(v), std::nullopt));
}
Tensor& Tensor::mul_(const Tensor& o) {
  LAZYX_LOCK;
  return assign_inplace("mul_", *this,
                        elementwise(Op::Mul, "mul_", {arg("mul_", *this), arg("mul_", o)}));
}
Tensor& Tensor::mul_(Scalar o) {
  LAZYX_LOCK;
  return assign_inplace("mul_", *this, elementwise(Op::Mul, "mul_", {arg("mul_", *this), arg(o)}));
}
Tensor& Tensor::div_(const Tensor& o) {
  LAZYX_LOCK;
  return assign_inplace("div_", *this, div_node("div_", arg("div_", *this), arg("div_", o)));
}
Tensor& Tensor::div_(Scalar o) {
  LAZYX_LOCK;
  return assign_inplace("div_", *this, div_node("div_", arg("div_", *this), arg(o)));
}
Tensor& Tensor::pow_(Scalar e) {
  LAZYX_LOCK;
  return assign_inplace("pow_", *this, elementwise(Op::Pow, "pow_", {arg("pow_", *this), arg(e)}));
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  LAZYX_LOCK;
  return assign_inplace("clamp_", *this, clamp_node("clamp_", *this, lo, hi));
}

// Unary math: float ops promote integer inputs to float32, as PyTorch does.
#define LAZYX_UNARY_FLOAT(fn, OP)                                  \
  Tensor Tensor::fn() const {                                      \
    LAZYX_LOCK;                                                    \
    return make_tensor(unary_float(Op::OP, #fn, *this));           \
  }                                                                \
  Tensor& Tensor::fn##_() {                                        \
    LAZYX_LOCK;                                                    \
    return assign_inplace(#fn "_", *this, unary_float(Op::OP, #fn "_", *this)); \
  }
LAZYX_UNARY_FLOAT(exp, Exp)
LAZYX_UNARY_FLOAT(log, Log)
LAZYX_UNARY_FLOAT(sqrt, Sqrt)
LAZYX_UNARY_FLOAT(rsqrt, Rsqrt)
LAZYX_UNARY_FLOAT(tanh, Tanh)
LAZYX_UNARY_FLOAT(sigmoid, Sigmoid)
LAZYX_UNARY_FLOAT(sin, Sin)
LAZYX_UNARY_FLOAT(cos, Cos)
#undef LAZYX_UNARY_FLOAT

Tensor Tensor::neg() const {
  LAZYX_LOCK;
  return make_tensor(unary_same(Op::Neg, "neg", *this, false));
}
Tensor& Tensor::neg_() {
  LAZYX_LOCK;
  return assign_inplace("neg_", *this, unary_same(Op::Neg, "neg_", *this, false));
}
Tensor Tensor::abs() const {
  LAZYX_LOCK;
  return make_tensor(unary_same(Op::Abs, "abs", *this, false));
}
Tensor& Tensor::abs_() {
  LAZYX_LOCK;
  return assign_inplace("abs_", *this, unary_same(Op::Abs, "abs_", *this, false));
}
Tensor Tensor::relu() const {
  LAZYX_LOCK;
  return make_tensor(unary_same(Op::Relu, "relu", *this, false));
}
Tensor& Tensor::relu_() {
  LAZYX_LOCK;
  return assign_inplace("relu_", *this, unary_same(Op::Relu, "relu_", *this, false));
}
Tensor Tensor::gelu(bool tanh_approximation) const {
  LAZYX_LOCK;
  Arg a = arg("gelu", *this);
  check_dtype("gelu", a.dtype, false, false, true);
  return make_tensor(
      ir::make_node(tanh_approximation ? Op::GeluTanh : Op::Gelu, a.dtype, a.shape(), {a.node}));
}
Tensor Tensor::logical_not() const {
  LAZYX_LOCK;
  Arg a = arg("logical_not", *this);
  return make_tensor(ir::make_node(Op::LogicalNot, kBool, a.shape(), {a.node}));
}

#define LAZYX_COMPARE(fn, OP)                                                     \
  Tensor Tensor::fn(const Tensor& o) const {                                      \
    LAZYX_LOCK;                                                                   \
    return make_tensor(compare(Op::OP, #fn, arg(#fn, *this), arg(#fn, o)));       \
  }                                                                               \
  Tensor Tensor::fn(Scalar o) const {                                             \
    LAZYX_LOCK;                                                                   \
    return make_tensor(compare(Op::OP, #fn, arg(#fn, *this), arg(o)));            \
  }
LAZYX_COMPARE(eq, Eq)
LAZYX_COMPARE(ne, Ne)
LAZYX_COMPARE(lt, Lt)
LAZYX_COMPARE(le, Le)
LAZYX_COMPARE(gt, Gt)
LAZYX_COMPARE(ge, Ge)
#undef LAZYX_COMPARE

Tensor Tensor::logical_and(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(
      elementwise(Op::LogicalAnd, "logical_and", {arg("logical_and", *this), arg("logical_and", o)},
                  kBool));
}
Tensor Tensor::logical_or(const Tensor& o) const {
  LAZYX_LOCK;
  return make_tensor(
      elementwise(Op::LogicalOr, "logical_or", {arg("logical_or", *this), arg("logical_or", o)},
                  kBool));
}

Tensor Tensor::to(Dtype d) const {
  LAZYX_LOCK;
  return make_tensor(cast(arg("to", *this).node, d));
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  LAZYX_LOCK;
  Arg ac = arg("where", c);
  if (ac.dtype != kBool) {
    ir::fail("where", std::string("condition must be bool, got ") + dtype_name(ac.dtype) + ".");
  }
  Arg aa = arg("where", a), ab = arg("where", b);
  Dtype rt = promote({aa, ab});
  Shape s = ir::broadcast_shapes("where", ir::broadcast_shapes("where", ac.shape(), aa.shape()),
                                 ab.shape());
  return make_tensor(ir::make_node(Op::Where, rt, s, {ac.node, aa.node, ab.node}));
}
Tensor where(const Tensor& c, Scalar a, const Tensor& b) {
  LAZYX_LOCK;
  Arg ac = arg("where", c), ab = arg("where", b);
  if (ac.dtype != kBool) ir::fail("where", "condition must be bool.");
  Dtype rt = promote({arg(a), ab});
  Shape s = ir::broadcast_shapes("where", ac.shape(), ab.shape());
  return make_tensor(ir::make_node(Op::Where, rt, s, {ac.node, scalar_node(a, rt), ab.node}));
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b) {
  LAZYX_LOCK;
  Arg ac = arg("where", c), aa = arg("where", a);
  if (ac.dtype != kBool) ir::fail("where", "condition must be bool.");
  Dtype rt = promote({aa, arg(b)});
  Shape s = ir::broadcast_shapes("where", ac.shape(), aa.shape());
  return make_tensor(ir::make_node(Op::Where, rt, s, {ac.node, aa.node, scalar_node(b, rt)}));
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Maximum, "maximum", {arg("maximum", a), arg("maximum", b)}));
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  LAZYX_LOCK;
  return make_tensor(elementwise(Op::Minimum, "minimum", {arg("minimum", a), arg("minimum", b)}));
}
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return x.clamp(lo, hi);
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  LAZYX_LOCK;
  Arg self = arg("masked_fill", *this), m = arg("masked_fill", mask);
  if (m.dtype != kBool) ir::fail("masked_fill", "mask must be bool, got " + std::string(dtype_name(m.dtype)) + ".");
  Shape s = ir::broadcast_shapes("masked_fill", self.shape(), m.shape());
  if (s != self.shape()) {
    ir::fail("masked_fill", "mask " + ir::shape_str(m.shape()) +
                                " must broadcast to the tensor's shape " +
                                ir::shape_str(self.shape()) + ".");
  }
  return make_tensor(ir::make_node(Op::Where, self.dtype, s,
                                   {m.node, scalar_node(value, self.dtype), self.node}));
}
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  LAZYX_LOCK;
  Tensor r = masked_fill(mask, value);
  return assign_inplace("masked_fill_", *this, r.impl()->storage()->pending_node());
}

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
Tensor operator+(Scalar a, const Tensor& b) { return b.add(a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
Tensor operator-(Scalar a, const Tensor& b) {
  LAZYX_LOCK;
  return make_tensor(add_like(Op::Sub, "sub", arg(a), arg("sub", b), std::nullopt));
}
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
Tensor operator*(Scalar a, const Tensor& b) { return b.mul(a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
Tensor operator/(Scalar a, const Tensor& b) {
  LAZYX_LOCK;
  return make_tensor(div_node("div", arg(a), arg("div", b)));
}
Tensor operator-(const Tensor& a) { return a.neg(); }

}  // namespace lazyx
