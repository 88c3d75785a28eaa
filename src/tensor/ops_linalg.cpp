// matmul and friends. Every form lowers to one batched Matmul node.
#include "lazyx/ops.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

ir::NodePtr matmul_node(const char* name, ir::NodePtr a, ir::NodePtr b) {
  if (a->dtype() != b->dtype()) {
    ir::fail(name, std::string("expected both operands to have the same dtype, got ") +
                       dtype_name(a->dtype()) + " and " + dtype_name(b->dtype()) + ".");
  }
  check_dtype(name, a->dtype(), false, true, true);
  Shape sa = a->shape(), sb = b->shape();
  if (sa.empty() || sb.empty()) {
    ir::fail(name, "both arguments need at least 1 dimension, got " + ir::shape_str(sa) +
                       " and " + ir::shape_str(sb) + ".");
  }
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) a = reshape_node(a, {1, sa[0]});
  if (vb) b = reshape_node(b, {sb[0], 1});
  const Shape& xa = a->shape();
  const Shape& xb = b->shape();
  int64_t n = xa[xa.size() - 2], k = xa.back(), k2 = xb[xb.size() - 2], m = xb.back();
  if (k != k2) {
    ir::fail(name, "shapes " + ir::shape_str(sa) + " and " + ir::shape_str(sb) +
                       " cannot be multiplied (" + std::to_string(n) + "x" + std::to_string(k) +
                       " and " + std::to_string(k2) + "x" + std::to_string(m) + ").");
  }
  Shape ba(xa.begin(), xa.end() - 2), bb(xb.begin(), xb.end() - 2);
  Shape out = ir::broadcast_shapes(name, ba, bb);
  out.push_back(n);
  out.push_back(m);
  ir::NodePtr r = ir::make_node(Op::Matmul, a->dtype(), out, {a, b});
  if (va || vb) {
    Shape s(out.begin(), out.end() - 2);
    if (!va) s.push_back(n);
    if (!vb) s.push_back(m);
    r = reshape_node(r, s);
  }
  return r;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  EngineLock lock(engine_mutex());
  return make_tensor(
      matmul_node("matmul", impl_of("matmul", a).value("matmul"), impl_of("matmul", b).value("matmul")));
}

Tensor mm(const Tensor& a, const Tensor& b) {
  EngineLock lock(engine_mutex());
  if (impl_of("mm", a).sizes().size() != 2 || impl_of("mm", b).sizes().size() != 2) {
    ir::fail("mm", "both arguments must be 2-D, got " + ir::shape_str(a.shape()) + " and " +
                       ir::shape_str(b.shape()) + ".");
  }
  return make_tensor(matmul_node("mm", a.impl()->value("mm"), b.impl()->value("mm")));
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  EngineLock lock(engine_mutex());
  const Shape& sa = impl_of("bmm", a).sizes();
  const Shape& sb = impl_of("bmm", b).sizes();
  if (sa.size() != 3 || sb.size() != 3 || sa[0] != sb[0]) {
    ir::fail("bmm", "both arguments must be 3-D with the same batch size, got " +
                        ir::shape_str(sa) + " and " + ir::shape_str(sb) + ".");
  }
  return make_tensor(matmul_node("bmm", a.impl()->value("bmm"), b.impl()->value("bmm")));
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha) {
  EngineLock lock(engine_mutex());
  Tensor prod = mm(m1, m2);
  Arg in = arg("addmm", input), p = arg("addmm", prod);
  Shape s = ir::broadcast_shapes("addmm", in.shape(), p.shape());
  if (s != p.shape()) {
    ir::fail("addmm", "input " + ir::shape_str(in.shape()) + " must broadcast to the product " +
                          ir::shape_str(p.shape()) + ".");
  }
  Dtype rt = promote({in, p});
  // Beta and alpha stay run-time scalars, so changing them does not recompile.
  ir::NodePtr scaled = ir::make_node(Op::Mul, rt, in.shape(), {in.node, scalar_node(beta, rt)});
  return make_tensor(ir::make_node(Op::Add, rt, s, {scaled, p.node, scalar_node(alpha, rt)}));
}

Tensor Tensor::matmul(const Tensor& o) const { return lazyx::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return lazyx::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return lazyx::bmm(*this, o); }

}  // namespace lazyx
