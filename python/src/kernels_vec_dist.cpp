// Kernels: addmv, addbmm, vdot, linalg_cross, and the pairwise distances cdist/pdist with their
// backward ops, as compositions of matmul, reductions and gathers.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

// beta * self + alpha * prod; beta == 0 ignores self (NaN included), as eager.
LT add_scaled(const Tensor& self, const LT& prod, c10::Scalar beta, c10::Scalar alpha) {
  if (!lazyx::is_floating(prod.dtype())) {  // integer inputs take integer scalars, as eager
    beta = c10::Scalar(beta.toLong());
    alpha = c10::Scalar(alpha.toLong());
  }
  LT p = is_one(alpha) ? prod : prod.mul(to_lz(alpha));
  if (beta.toDouble() == 0.0) return p.expand(p.shape()).contiguous();
  LT s = lz(self);
  if (!is_one(beta)) s = s.mul(to_lz(beta));
  return s.add(p);
}
Tensor addmv_k(const Tensor& self, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "[addmv] expected a matrix and a vector, got ",
              mat.dim(), "-D and ", vec.dim(), "-D.");
  LT m = lz(mat), v = lz(vec);
  LT mv = lazyx::is_floating(m.dtype()) ? m.matmul(v.unsqueeze(1)).squeeze(1)
                                        : m.mul(v.unsqueeze(0)).sum({1}).to(m.dtype());
  LT r = add_scaled(self, mv, beta, alpha);
  return wrap(r.expand({mat.size(0)}).contiguous());
}
Tensor& addmv_out(const Tensor& self, const Tensor& mat, const Tensor& vec,
                  const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  return write_out(out, lz(addmv_k(self, mat, vec, beta, alpha)));
}
Tensor& addmv_(Tensor& self, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta,
               const c10::Scalar& alpha) {
  LT t = lz(self);
  t.copy_(lz(addmv_k(self, mat, vec, beta, alpha)));
  return self;
}
Tensor addbmm_k(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
              const c10::Scalar& alpha) {
  TORCH_CHECK(b1.dim() == 3 && b2.dim() == 3, "[addbmm] batch1 and batch2 must be 3-D.");
  LT x = lz(b1), y = lz(b2);
  const Shape out{b1.size(1), b2.size(2)};
  if (!lazyx::is_floating(x.dtype())) {
    LT prod = x.unsqueeze(-1).mul(y.unsqueeze(1)).sum({0, 2}).to(x.dtype());
    return wrap(add_scaled(self, prod, beta, alpha).expand(out).contiguous());
  }
  if (lazyx::dtype_size(x.dtype()) == 2) {
    // Eager's 16-bit CPU gemm rounds partial sums in a way not reproduced here: run on CPU.
    lazyx::metrics::add_counter("aten::addbmm");
    return to_device(at::addbmm(to_cpu(self), to_cpu(b1), to_cpu(b2), beta, alpha));
  }
  LT prod = x.bmm(y).sum({0});
  return wrap(add_scaled(self, prod, beta, alpha).expand(out).contiguous());
}
Tensor& addbmm_out(const Tensor& self, const Tensor& b1, const Tensor& b2,
                   const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  return write_out(out, lz(addbmm_k(self, b1, b2, beta, alpha)));
}
Tensor& addbmm_(Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                const c10::Scalar& alpha) {
  LT r = lz(addbmm_k(self, b1, b2, beta, alpha));
  if (to_shape(self.sizes()) != r.shape()) resize_impl(self, r.shape());  // eager resizes here
  LT t = lz(self);
  t.copy_(r);
  return self;
}
Tensor vdot(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1 && a.numel() == b.numel(),
              "[vdot] expected two 1-D tensors of the same size, got ", a.sizes(), " and ",
              b.sizes(), ".");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "[vdot] expected both inputs to have the same "
              "dtype, got ", a.scalar_type(), " and ", b.scalar_type(), ".");
  return wrap(dot_same_dtype(a, b));
}

// cross: a[i+1] b[i+2] - a[i+2] b[i+1] along a dim of size 3.
LT cross_v(const Tensor& a, const Tensor& b, int64_t dim) {
  Shape s = to_shape(at::infer_size(a.sizes(), b.sizes()));
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()));
  TORCH_CHECK(s[d] == 3, "[linalg_cross] dimension ", dim, " must have size 3, got ", s[d], ".");
  lazyx::Dtype dt = lazyx::promote_types(lz(a).dtype(), lz(b).dtype());
  LT x = lz(a).to(dt).expand(s), y = lz(b).to(dt).expand(s);
  LT i1 = lazyx::tensor<int64_t>({1, 2, 0}), i2 = lazyx::tensor<int64_t>({2, 0, 1});
  return x.index_select(d, i1).mul(y.index_select(d, i2))
      .sub(x.index_select(d, i2).mul(y.index_select(d, i1)));
}
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim) { return wrap(cross_v(a, b, dim)); }
Tensor& linalg_cross_out(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  return write_out(out, cross_v(a, b, dim));
}

// The p-norm of `diff` over its last dim.
LT pnorm(const LT& diff, double p) {
  LT a = diff.abs();
  if (p == 0) return a.ne(0.0).to(diff.dtype()).sum({-1});
  if (p == 1) return a.sum({-1});
  if (p == 2) return a.mul(a).sum({-1}).sqrt();
  if (std::isinf(p)) return a.amax({-1});
  return a.pow(p).sum({-1}).pow(1.0 / p);
}
// d norm / d diff, given the norm `dist` broadcast to diff's shape (0 where dist is 0).
LT pnorm_grad(const LT& diff, const LT& dist, double p) {
  LT zero = lazyx::zeros({}, diff.dtype()), one = lazyx::ones({}, diff.dtype());
  LT sign = lazyx::where(diff.gt(0.0), one, lazyx::where(diff.lt(0.0), one.neg(), zero));
  if (p == 0) return lazyx::zeros(diff.shape(), diff.dtype());
  if (p == 1) return sign;
  LT safe = lazyx::where(dist.eq(0.0), one, dist);
  LT g;
  if (std::isinf(p)) {
    g = sign.mul(diff.abs().eq(dist).to(diff.dtype()));
  } else if (p == 2) {
    g = diff.div(safe);
  } else {
    g = sign.mul(diff.abs().div(safe).pow(p - 1));
  }
  return lazyx::where(dist.eq(0.0), zero, g);
}
Tensor cdist_forward(const Tensor& x1, const Tensor& x2, double p, optional<int64_t>) {
  LT diff = lz(x1).unsqueeze(-2).sub(lz(x2).unsqueeze(-3));
  return wrap(pnorm(diff, p));
}
Tensor cdist_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p,
                      const Tensor& cdist) {
  LT diff = lz(x1).unsqueeze(-2).sub(lz(x2).unsqueeze(-3));
  LT g = pnorm_grad(diff, lz(cdist).unsqueeze(-1), p).mul(lz(grad).unsqueeze(-1));
  return wrap(g.sum({-2}));
}
// The pairs i < j of pdist in row-major order (built on the host from N alone).
std::pair<LT, LT> pairs(int64_t n) {
  Tensor ij = at::triu_indices(n, n, 1);
  return {upload(ij[0].contiguous()), upload(ij[1].contiguous())};
}
Tensor pdist_forward(const Tensor& self, double p) {
  TORCH_CHECK(self.dim() == 2, "[pdist] expected a 2-D input, got ", self.dim(), "-D.");
  const int64_t n = self.size(0);
  if (n < 2) return wrap(lazyx::zeros({0}, lz(self).dtype()));
  auto [i, j] = pairs(n);
  LT x = lz(self);
  return wrap(pnorm(x.index_select(0, i).sub(x.index_select(0, j)), p));
}
Tensor pdist_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  const int64_t n = self.size(0);
  LT x = lz(self);
  LT gx = lazyx::zeros(x.shape(), x.dtype());
  if (n < 2) return wrap(gx);
  auto [i, j] = pairs(n);
  LT diff = x.index_select(0, i).sub(x.index_select(0, j));
  LT g = pnorm_grad(diff, lz(pdist).unsqueeze(-1), p).mul(lz(grad).unsqueeze(-1));
  gx.index_put_({i}, g, true);
  gx.index_put_({j}, g.neg(), true);
  return wrap(gx);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "addmv", LZ_FN(addmv_k));
  impl(m, "addmv.out", LZ_FN(addmv_out));
  impl(m, "addmv_", LZ_FN(addmv_));
  impl(m, "addbmm", LZ_FN(addbmm_k));
  impl(m, "addbmm.out", LZ_FN(addbmm_out));
  impl(m, "addbmm_", LZ_FN(addbmm_));
  impl(m, "vdot", LZ_FN(vdot));
  impl(m, "linalg_cross", LZ_FN(linalg_cross));
  impl(m, "linalg_cross.out", LZ_FN(linalg_cross_out));
  impl(m, "_cdist_forward", LZ_FN(cdist_forward));
  impl(m, "_cdist_backward", LZ_FN(cdist_backward));
  impl(m, "_pdist_forward", LZ_FN(pdist_forward));
  impl(m, "_pdist_backward", LZ_FN(pdist_backward));
}

}  // namespace lazyx_bridge
