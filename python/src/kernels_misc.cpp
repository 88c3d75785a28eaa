// Kernels: compositions of native ops with no IR op of their own (equal, isin).
#include <torch/library.h>

#include "diag_bridge.h"
#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;

namespace {

// Shapes are compared on the host; values by one device reduction and one read.
bool equal(const Tensor& self, const Tensor& other) {
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  PyCause cause("value read by torch.equal");
  LT diff = lz(self).ne(lz(other)).to(lazyx::kInt64).sum();
  return diff.item<int64_t>() == 0;
}

// x in test: x[..., None] == test.flatten(), reduced over the last dim.
LT isin_lz(const LT& x, const LT& test, bool invert) {
  LT flat = test.reshape({test.numel()});
  LT hits = x.unsqueeze(static_cast<int64_t>(x.shape().size())).eq(flat);
  LT count = hits.to(lazyx::kInt64).sum({static_cast<int64_t>(x.shape().size())});
  return invert ? count.eq(lazyx::Scalar(int64_t{0})) : count.ne(lazyx::Scalar(int64_t{0}));
}

// Eager's isin has no bool or 16-bit float kernels; fail as it does.
void check_isin_dtype(const Tensor& t) {
  const auto st = t.scalar_type();
  TORCH_CHECK(st != at::kBool && st != at::kBFloat16 && st != at::kHalf,
              "[isin] unsupported input dtype ", st,
              "; convert the inputs to an integer or float32/float64 dtype");
}

Tensor isin_tt(const Tensor& x, const Tensor& test, bool, bool invert) {
  check_isin_dtype(x);
  check_isin_dtype(test);
  return wrap(isin_lz(lz(x), lz(test), invert));
}

Tensor isin_ts(const Tensor& x, const c10::Scalar& test, bool, bool invert) {
  check_isin_dtype(x);
  LT t = lazyx::scalar_tensor(to_lz(test));
  return wrap(isin_lz(lz(x), t, invert));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", LZ_FN(equal));
  m.impl("isin.Tensor_Tensor", LZ_FN(isin_tt));
  m.impl("isin.Tensor_Scalar", LZ_FN(isin_ts));
}

}  // namespace lazyx_bridge
