// Kernels: matrix products.
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

// Whether `t` broadcasts to `shape` without growing it.
bool broadcasts_to(const Tensor& t, std::initializer_list<int64_t> shape) {
  const int64_t n = static_cast<int64_t>(shape.size()), lead = n - t.dim();
  if (lead < 0) return false;
  for (int64_t i = 0; i < t.dim(); ++i) {
    const int64_t want = shape.begin()[lead + i];
    if (t.size(i) != 1 && t.size(i) != want) return false;
  }
  return true;
}

Tensor mm(const Tensor& a, const Tensor& b) { return wrap(lazyx::mm(lz(a), lz(b))); }
Tensor bmm(const Tensor& a, const Tensor& b) { return wrap(lazyx::bmm(lz(a), lz(b))); }
Tensor addmm(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  // nn.Linear's beta = alpha = 1: a plain add skips the two scaling nodes and their run-time
  // scalars (as add.Tensor does for alpha 1). The product is [n, m], so it comes first.
  if (is_one(beta) && is_one(alpha) && s.scalar_type() == m1.scalar_type() &&
      s.scalar_type() == m2.scalar_type() && m1.dim() == 2 && m2.dim() == 2 &&
      broadcasts_to(s, {m1.size(0), m2.size(1)})) {
    return wrap(lazyx::mm(lz(m1), lz(m2)).add(lz(s)));
  }
  return wrap(lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha)));
}
Tensor& addmm_out(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  LT r = lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha));
  return write_out(out, r);
}
Tensor& mm_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return write_out(out, lazyx::mm(lz(a), lz(b)));
}
// Attention scores plus a mask (nn.MultiheadAttention): beta * self + alpha * bmm(b1, b2). Beta
// and alpha stay run-time scalars; beta 0 ignores self, its NaNs included, as torch does.
// Integer inputs take integer scalars (as eager); 16-bit floats compute in float32 and round
// once at the end.
LT baddbmm_value(const Tensor& s, const Tensor& b1, const Tensor& b2, c10::Scalar beta,
                 c10::Scalar alpha) {
  TORCH_CHECK(s.scalar_type() == b1.scalar_type() && b1.scalar_type() == b2.scalar_type(),
              "[baddbmm] self, batch1 and batch2 must have one dtype; got ", s.scalar_type(), ", ",
              b1.scalar_type(), " and ", b2.scalar_type());
  const bool integral = c10::isIntegralType(s.scalar_type(), true);
  if (integral) {
    beta = c10::Scalar(beta.toLong());
    alpha = c10::Scalar(alpha.toLong());
  }
  const bool narrow = s.scalar_type() == at::kBFloat16 || s.scalar_type() == at::kHalf;
  auto up = [&](const Tensor& t) { return narrow ? lz(t).to(lazyx::kFloat32) : lz(t); };
  LT p = lazyx::bmm(up(b1), up(b2));
  const lazyx::Shape& ps = p.sizes();
  TORCH_CHECK(broadcasts_to(s, {ps[0], ps[1], ps[2]}), "[baddbmm] self of shape ", s.sizes(),
              " must broadcast to the product's shape [", ps[0], ", ", ps[1], ", ", ps[2], "]");
  if (!is_one(alpha)) p = p.mul(to_lz(alpha));
  if (beta.toDouble() != 0.0) {
    LT sv = up(s);
    if (!is_one(beta)) sv = sv.mul(to_lz(beta));
    p = p.add(sv);
  }
  return narrow ? p.to(lz(s).dtype()) : p;
}
Tensor baddbmm(const Tensor& s, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
               const c10::Scalar& alpha) {
  return wrap(baddbmm_value(s, b1, b2, beta, alpha));
}
Tensor& baddbmm_(Tensor& s, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  LT r = baddbmm_value(s, b1, b2, beta, alpha);
  TORCH_CHECK(r.sizes() == lz(s).sizes(), "[baddbmm_] self of shape ", s.sizes(),
              " cannot hold the result; use baddbmm");
  return assign(s, r, false);
}

}  // namespace

// sum alone would widen an integer dtype to int64: the dtype and, for narrow types, the value
// would differ from eager's.
LT dot_same_dtype(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.scalar_type() != at::kBool, "\"dot\" not implemented for 'Bool'");
  LT r = lz(a).mul(lz(b)).sum();
  return r.dtype() == lz(a).dtype() ? r : r.to(lz(a).dtype());
}

namespace {

Tensor dot(const Tensor& a, const Tensor& b) { return wrap(dot_same_dtype(a, b)); }
Tensor mv(const Tensor& a, const Tensor& v) { return wrap(lazyx::matmul(lz(a), lz(v))); }

// LAPACK status checks read the status on CPU, as torch does for CUDA (an empty batch passes).
void linalg_check_errors(const Tensor& info, c10::string_view api_name, bool is_matrix) {
  at::_linalg_check_errors(to_cpu(info), api_name, is_matrix);
}

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "_linalg_check_errors", LZ_FN(linalg_check_errors));
  impl(m, "mm", LZ_FN(mm));
  impl(m, "bmm", LZ_FN(bmm));
  impl(m, "addmm", LZ_FN(addmm));
  impl(m, "addmm.out", LZ_FN(addmm_out));
  impl(m, "mm.out", LZ_FN(mm_out));
  impl(m, "baddbmm", LZ_FN(baddbmm));
  impl(m, "baddbmm_", LZ_FN(baddbmm_));
  impl(m, "dot", LZ_FN(dot));
  impl(m, "mv", LZ_FN(mv));
}

}  // namespace

}  // namespace lazyx_bridge
