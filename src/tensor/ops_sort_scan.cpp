// Sorts and scans (the IR ops Sort and Scan) and what is built from them: topk, kthvalue,
// prod, argmin; triangles, flip and roll as compositions of existing ops.
#include "lazyx/ops.h"
#include "lazyx/sort.h"
#include "tensor/ops_common.h"

namespace lazyx {

using ir::Op;
using namespace detail;

namespace {

int64_t rank_of(const char* op, const Tensor& x) {
  return static_cast<int64_t>(impl_of(op, x).sizes().size());
}

int64_t dim_size(const Tensor& x, int64_t d) { return x.dim() == 0 ? 1 : x.size(d); }

Dtype int_to_int64(Dtype d, std::optional<Dtype> want) {
  if (want) return *want;
  return is_floating(d) ? d : kInt64;
}

}  // namespace

Tensor argsort(const Tensor& x, int64_t dim, bool descending, SortMode mode, int64_t k) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("sort", x);
  ir::Attrs a;
  a.i0 = ir::wrap_dim("sort", dim, static_cast<int64_t>(i.sizes().size()));
  a.flag = descending;
  a.ints = {static_cast<int64_t>(mode), k};
  return make_tensor(ir::make_node(Op::Sort, kInt64, i.sizes(), {i.value("sort")}, a));
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  Tensor idx = argsort(x, dim, descending, stable ? SortMode::Stable : SortMode::EagerUnstable);
  if (x.dim() == 0) return {x.clone(), idx};
  return {x.gather(dim, idx), idx};
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t d = ir::wrap_dim("topk", dim, rank_of("topk", x));
  const int64_t n = dim_size(x, d);
  if (k < 0 || k > n) {
    ir::fail("topk", "k = " + std::to_string(k) + " is out of range for a dimension of size " +
                         std::to_string(n) + "; pick 0 <= k <= " + std::to_string(n) + ".");
  }
  Tensor idx = argsort(x, d, largest, SortMode::EagerTopk, k);
  if (x.dim() == 0) return {x.clone(), idx};
  idx = idx.narrow(d, 0, k).contiguous();
  return {x.gather(d, idx), idx};
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  const int64_t d = ir::wrap_dim("kthvalue", dim, rank_of("kthvalue", x));
  const int64_t n = dim_size(x, d);
  if (k < 1 || k > n) {
    ir::fail("kthvalue", "k = " + std::to_string(k) + " is out of range for a dimension of size " +
                             std::to_string(n) + "; pick 1 <= k <= " + std::to_string(n) + ".");
  }
  if (x.dim() == 0) return {x.clone(), zeros({}, kInt64)};
  Tensor idx = argsort(x, d, false, SortMode::EagerKth, k).narrow(d, k - 1, 1).contiguous();
  Tensor val = x.gather(d, idx);
  if (!keepdim) return {val.squeeze(d), idx.squeeze(d)};
  return {val, idx};
}

Tensor scan(const Tensor& x, int64_t dim, ScanKind kind) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("scan", x);
  ir::Attrs a;
  a.i0 = ir::wrap_dim("scan", dim, static_cast<int64_t>(i.sizes().size()));
  a.ints = {static_cast<int64_t>(kind)};
  const bool arg = kind == ScanKind::ArgMax || kind == ScanKind::ArgMin;
  if (kind == ScanKind::LogSumExp) check_dtype("logcumsumexp", i.dtype(), false, false, true);
  if (kind == ScanKind::Sum || kind == ScanKind::Prod) {
    check_dtype(kind == ScanKind::Sum ? "cumsum" : "cumprod", i.dtype(), false, true, true);
  }
  return make_tensor(
      ir::make_node(Op::Scan, arg ? kInt64 : i.dtype(), i.sizes(), {i.value("scan")}, a));
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return scan(x.to(int_to_int64(x.dtype(), dtype)), dim, ScanKind::Sum);
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return scan(x.to(int_to_int64(x.dtype(), dtype)), dim, ScanKind::Prod);
}
Tensor logcumsumexp(const Tensor& x, int64_t dim) { return scan(x, dim, ScanKind::LogSumExp); }
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  return {scan(x, dim, ScanKind::Max), scan(x, dim, ScanKind::ArgMax)};
}
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  return {scan(x, dim, ScanKind::Min), scan(x, dim, ScanKind::ArgMin)};
}

// prod: the last element of cumprod (exact for integers; one rounding per step for floats).
Tensor prod(const Tensor& x, std::optional<Dtype> dtype) {
  Tensor flat = x.reshape({x.numel()});
  if (x.numel() == 0) return ones({}, int_to_int64(x.dtype(), dtype));
  return cumprod(flat, 0, dtype).select(0, x.numel() - 1).contiguous();
}
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<Dtype> dtype) {
  const int64_t d = ir::wrap_dim("prod", dim, rank_of("prod", x));
  if (x.dim() == 0) return x.to(int_to_int64(x.dtype(), dtype));
  const int64_t n = x.size(d);
  Tensor r;
  if (n == 0) {
    Shape s = x.shape();
    s[d] = 1;
    r = ones(s, int_to_int64(x.dtype(), dtype));
  } else {
    r = cumprod(x, d, dtype).narrow(d, n - 1, 1).contiguous();
  }
  return keepdim ? r : r.squeeze(d).contiguous();
}

// argmin as argmax of the negation (integers widened first); NaN still wins, ties keep the
// first index.
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_dtype("argmin", impl_of("argmin", x).dtype(), true, true, true);
  Tensor v = is_floating(x.dtype()) ? x : x.to(kInt64);
  return v.neg().argmax(dim, keepdim);
}

namespace {

// Whether element (r, c) of the last two dims is kept: c - r <= diagonal (tril) or >= (triu).
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  if (rank_of(op, x) < 2) {
    ir::fail(op, "input " + ir::shape_str(x.shape()) + " must have at least 2 dimensions.");
  }
  const int64_t R = x.size(-2), C = x.size(-1);
  Tensor rows = arange(0, R, 1, kInt64).unsqueeze(1);
  Tensor cols = arange(0, C, 1, kInt64).unsqueeze(0);
  Tensor off = cols.sub(rows);
  Tensor keep = lower ? off.le(Scalar(static_cast<long long>(diagonal)))
                      : off.ge(Scalar(static_cast<long long>(diagonal)));
  return where(keep, x, zeros({}, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> wd = ir::wrap_dims("flip", dims.empty() ? std::vector<int64_t>{} : dims,
                                          rank_of("flip", x));
  if (dims.empty() || x.dim() == 0) return x.clone();
  Tensor r = x;
  for (int64_t d : wd) {
    const int64_t n = x.size(d);
    if (n <= 1) continue;
    r = r.index_select(d, arange(n - 1, -1, -1, kInt64));
  }
  return r.is_view() || r.impl() == x.impl() ? r.clone() : r;
}

Tensor roll(const Tensor& x, int64_t shift, int64_t dim) {
  const int64_t d = ir::wrap_dim("roll", dim, rank_of("roll", x));
  if (x.dim() == 0) return x.clone();
  const int64_t n = x.size(d);
  if (n == 0) return x.clone();
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x.clone();
  return cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
}

}  // namespace lazyx

namespace lazyx {

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      ScatterKind kind, bool include_self) {
  EngineLock lock(engine_mutex());
  const char* op = "scatter_reduce";
  const TensorImpl& self = impl_of(op, x);
  const TensorImpl& ii = impl_of(op, index);
  const TensorImpl& si = impl_of(op, src);
  const int64_t rank = static_cast<int64_t>(self.sizes().size());
  const int64_t d = ir::wrap_dim(op, dim, rank);
  if (ii.dtype() != kInt64) ir::fail(op, "index must be an int64 tensor; call .to(kInt64).");
  if (ir::shape_numel(ii.sizes()) == 0) return make_tensor(self.value(op));  // writes nothing
  check_scatter_shapes(op, self.sizes(), ii.sizes(), si.sizes(), d);
  ir::Attrs a;
  a.i0 = d;
  a.ints = {static_cast<int64_t>(kind), include_self ? 1 : 0};
  return make_tensor(ir::make_node(Op::ScatterReduce, self.dtype(), self.sizes(),
                                   {self.value(op), ii.value(op), cast(si.value(op), self.dtype())},
                                   a));
}

}  // namespace lazyx
