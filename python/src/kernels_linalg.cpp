// Kernels: matrix products.
#include "kernels.h"

#include <torch/library.h>

namespace lazyx_bridge {

using at::Tensor;

namespace {

Tensor mm(const Tensor& a, const Tensor& b) { return wrap(lazyx::mm(lz(a), lz(b))); }
Tensor bmm(const Tensor& a, const Tensor& b) { return wrap(lazyx::bmm(lz(a), lz(b))); }
Tensor addmm(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  return wrap(lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha)));
}
Tensor& addmm_out(const Tensor& s, const Tensor& m1, const Tensor& m2, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  LT r = lazyx::addmm(lz(s), lz(m1), lz(m2), to_lz(beta), to_lz(alpha));
  return assign(out, r, true);
}
Tensor& mm_out(const Tensor& a, const Tensor& b, Tensor& out) {
  return assign(out, lazyx::mm(lz(a), lz(b)), true);
}
Tensor dot(const Tensor& a, const Tensor& b) { return wrap(lz(a).mul(lz(b)).sum()); }
Tensor mv(const Tensor& a, const Tensor& v) { return wrap(lazyx::matmul(lz(a), lz(v))); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("dot", TORCH_FN(dot));
  m.impl("mv", TORCH_FN(mv));
}

}  // namespace

}  // namespace lazyx_bridge
