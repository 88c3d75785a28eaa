// Kernels: sorts, scans and the reductions built on them (lazyx/sort.h), triangles, flip, roll,
// diag/trace/eye. Every op here is native: no CPU fallback, no sync.
#include <torch/library.h>

#include <limits>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

using TT = std::tuple<Tensor, Tensor>;
using TTr = std::tuple<Tensor&, Tensor&>;

LT ll(int64_t v) { return lazyx::full({}, lazyx::Scalar(static_cast<long long>(v)), lazyx::kInt64); }
std::optional<lazyx::Dtype> opt_dtype(optional<c10::ScalarType> d) {
  if (!d.has_value()) return std::nullopt;
  return to_lz(*d);
}
TTr write_two(Tensor& a, Tensor& b, LT x, LT y) {
  write_out(a, std::move(x));
  write_out(b, std::move(y));
  return {a, b};
}

// Triangles.
Tensor tril(const Tensor& s, int64_t k) { return wrap(lazyx::tril(lz(s), k)); }
Tensor triu(const Tensor& s, int64_t k) { return wrap(lazyx::triu(lz(s), k)); }
Tensor& tril_out(const Tensor& s, int64_t k, Tensor& out) { return write_out(out, lazyx::tril(lz(s), k)); }
Tensor& triu_out(const Tensor& s, int64_t k, Tensor& out) { return write_out(out, lazyx::triu(lz(s), k)); }
Tensor& tril_(Tensor& s, int64_t k) {
  LT t = lz(s);
  t.copy_(lazyx::tril(t, k));
  return s;
}
Tensor& triu_(Tensor& s, int64_t k) {
  LT t = lz(s);
  t.copy_(lazyx::triu(t, k));
  return s;
}
Tensor flip(const Tensor& s, c10::IntArrayRef dims) {
  if (dims.empty()) return wrap(lz(s).clone());
  return wrap(lazyx::flip(lz(s), to_dims(dims)));
}
Tensor roll(const Tensor& s, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "[roll] expected at least one shift.");
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "[roll] without dims takes one shift, got ", shifts.size());
    LT flat = lz(s).reshape({s.numel()});
    return wrap(lazyx::roll(flat, shifts[0], 0).reshape(to_shape(s.sizes())));
  }
  TORCH_CHECK(shifts.size() == dims.size(), "[roll] shifts (", shifts.size(), ") and dims (",
              dims.size(), ") must have the same length.");
  LT r = lz(s);
  for (size_t i = 0; i < dims.size(); ++i) r = lazyx::roll(r, shifts[i], wrap_dim(dims[i], s.dim()));
  return wrap(r.is_view() ? r.clone() : r);
}

// Scans.
LT cumsum_v(const Tensor& s, int64_t dim, optional<c10::ScalarType> d) {
  return lazyx::cumsum(lz(s), wrap_dim(dim, s.dim()), opt_dtype(d));
}
LT cumprod_v(const Tensor& s, int64_t dim, optional<c10::ScalarType> d) {
  return lazyx::cumprod(lz(s), wrap_dim(dim, s.dim()), opt_dtype(d));
}
Tensor cumsum(const Tensor& s, int64_t dim, optional<c10::ScalarType> d) { return wrap(cumsum_v(s, dim, d)); }
Tensor cumprod(const Tensor& s, int64_t dim, optional<c10::ScalarType> d) { return wrap(cumprod_v(s, dim, d)); }
Tensor& cumsum_out(const Tensor& s, int64_t dim, optional<c10::ScalarType> d, Tensor& out) {
  return write_out(out, cumsum_v(s, dim, d.has_value() ? d : out.scalar_type()));
}
Tensor& cumprod_out(const Tensor& s, int64_t dim, optional<c10::ScalarType> d, Tensor& out) {
  return write_out(out, cumprod_v(s, dim, d.has_value() ? d : out.scalar_type()));
}
Tensor& cumsum_(Tensor& s, int64_t dim, optional<c10::ScalarType> d) {
  LT t = lz(s);
  t.copy_(cumsum_v(s, dim, d.has_value() ? d : s.scalar_type()));
  return s;
}
Tensor& cumprod_(Tensor& s, int64_t dim, optional<c10::ScalarType> d) {
  LT t = lz(s);
  t.copy_(cumprod_v(s, dim, d.has_value() ? d : s.scalar_type()));
  return s;
}
Tensor logcumsumexp(const Tensor& s, int64_t dim) {
  return wrap(lazyx::logcumsumexp(lz(s), wrap_dim(dim, s.dim())));
}
Tensor& logcumsumexp_out(const Tensor& s, int64_t dim, Tensor& out) {
  return write_out(out, lazyx::logcumsumexp(lz(s), wrap_dim(dim, s.dim())));
}
void cummax_helper(const Tensor& s, Tensor& values, Tensor& indices, int64_t dim) {
  auto [v, i] = lazyx::cummax(lz(s), wrap_dim(dim, s.dim()));
  write_two(values, indices, v, i);
}
void cummin_helper(const Tensor& s, Tensor& values, Tensor& indices, int64_t dim) {
  auto [v, i] = lazyx::cummin(lz(s), wrap_dim(dim, s.dim()));
  write_two(values, indices, v, i);
}

// Sorts: ties in eager's order (stable, or std::sort's order for stable=False).
TT sort_stable(const Tensor& s, optional<bool> stable, int64_t dim, bool desc) {
  auto [v, i] = lazyx::sort(lz(s), wrap_dim(dim, s.dim()), desc, stable.value_or(false));
  return {wrap(v), wrap(i)};
}
TTr sort_out(const Tensor& s, optional<bool> stable, int64_t dim, bool desc, Tensor& v,
             Tensor& i) {
  auto [a, b] = lazyx::sort(lz(s), wrap_dim(dim, s.dim()), desc, stable.value_or(false));
  return write_two(v, i, a, b);
}
Tensor argsort_stable(const Tensor& s, bool stable, int64_t dim, bool desc) {
  return wrap(lazyx::argsort(lz(s), wrap_dim(dim, s.dim()), desc,
                             stable ? lazyx::SortMode::Stable : lazyx::SortMode::EagerUnstable));
}
TT topk(const Tensor& s, int64_t k, int64_t dim, bool largest, bool) {
  auto [v, i] = lazyx::topk(lz(s), k, wrap_dim(dim, s.dim()), largest);
  return {wrap(v), wrap(i)};
}
TTr topk_out(const Tensor& s, int64_t k, int64_t dim, bool largest, bool, Tensor& v, Tensor& i) {
  auto [a, b] = lazyx::topk(lz(s), k, wrap_dim(dim, s.dim()), largest);
  return write_two(v, i, a, b);
}
TTr kthvalue_out(const Tensor& s, int64_t k, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  auto [a, b] = lazyx::kthvalue(lz(s), k, wrap_dim(dim, s.dim()), keepdim);
  return write_two(v, i, a, b);
}

// Median along `d` of x (rank >= 1): the lower middle of the sorted line; a line with NaN gives
// its first NaN (median) or ignores them (nanmedian; all-NaN lines give NaN).
std::pair<LT, LT> median_dim(const LT& x, int64_t d, bool keepdim, bool ignore_nan) {
  const int64_t n = x.size(d);
  TORCH_CHECK(n > 0, "[median] cannot take the median of an empty dimension.");
  LT nans = x.ne(x).sum({d}, true);
  LT pos;
  if (ignore_nan) {
    LT m = nans.neg().add(li(n));  // valid count
    LT half = m.sub(li(1)).to(lazyx::kFloat64).div(2.0).to(lazyx::kInt64);
    pos = lazyx::where(m.gt(li(0)), half, ll(0));
  } else {
    pos = lazyx::where(nans.gt(li(0)), nans.neg().add(li(n)), ll((n - 1) / 2));
  }
  LT idx = lazyx::argsort(x, d).gather(d, pos);
  LT val = x.gather(d, idx);
  if (!keepdim) return {val.squeeze(d).contiguous(), idx.squeeze(d).contiguous()};
  return {val, idx};
}
Tensor median_all(const Tensor& s, bool ignore_nan) {
  if (s.numel() == 0) return wrap(lazyx::full({}, std::numeric_limits<double>::quiet_NaN(), lz(s).dtype()));
  return wrap(median_dim(lz(s).reshape({s.numel()}), 0, false, ignore_nan).first);
}
Tensor median(const Tensor& s) { return median_all(s, false); }
Tensor nanmedian(const Tensor& s) { return median_all(s, true); }
TTr median_out_impl(const Tensor& s, int64_t dim, bool keepdim, Tensor& v, Tensor& i, bool nan) {
  if (s.dim() == 0) return write_two(v, i, lz(s).clone(), ll(0));
  auto [a, b] = median_dim(lz(s), wrap_dim(dim, s.dim()), keepdim, nan);
  return write_two(v, i, a, b);
}
TTr median_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  return median_out_impl(s, dim, keepdim, v, i, false);
}
TTr nanmedian_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  return median_out_impl(s, dim, keepdim, v, i, true);
}

// mode: the most frequent value of each line (the smallest of equally frequent ones) and the
// index eager reports for it: eager sorts (value, index) pairs with the unstable sort
// (SortMode::EagerUnstable) and takes the index at the end of that value's run, which for lines
// longer than 16 is not the last index holding it. Counts compare all pairs of a line: O(n^2).
TT mode(const Tensor& s, int64_t dim, bool keepdim) {
  LT x = lz(s);
  if (s.dim() == 0) return {wrap(x.clone()), wrap(ll(0))};
  const int64_t d = wrap_dim(dim, s.dim()), n = s.size(d);
  TORCH_CHECK(n > 0, "[mode] cannot take the mode of an empty dimension.");
  LT xt = x.transpose(d, -1).contiguous();
  LT cnt = xt.unsqueeze(-1).eq(xt.unsqueeze(-2)).to(lazyx::kInt64).sum({-1});
  LT cand = cnt.eq(cnt.amax({-1}, true));
  LT val = lazyx::where(cand, xt, xt.amax({-1}, true)).amin({-1}, true);
  auto [sorted, order] = lazyx::sort(xt, -1, false, /*stable=*/false);  // EagerUnstable
  LT pos = lazyx::arange(0, n, 1, lazyx::kInt64);
  LT idx = order.gather(-1, lazyx::where(sorted.eq(val), pos, ll(-1)).amax({-1}, true));
  val = val.transpose(d, -1).contiguous();
  idx = idx.transpose(d, -1).contiguous();
  if (!keepdim) return {wrap(val.squeeze(d).contiguous()), wrap(idx.squeeze(d).contiguous())};
  return {wrap(val), wrap(idx)};
}

// mode.values: torch's own accepts CPU and CUDA tensors only.
TTr mode_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  auto [a, b] = lazyx_bridge::mode(s, dim, keepdim);
  return write_two(v, i, lz(a), lz(b));
}

// Reductions.
Tensor argmin_k(const Tensor& s, optional<int64_t> dim, bool keepdim) {
  if (dim.has_value()) return wrap(lazyx::argmin(lz(s), wrap_dim(*dim, s.dim()), keepdim));
  return wrap(lazyx::argmin(lz(s), std::nullopt, keepdim));
}
Tensor& argmin_out(const Tensor& s, optional<int64_t> dim, bool keepdim, Tensor& out) {
  return write_out(out, lz(argmin_k(s, dim, keepdim)));
}
TT min_dim(const Tensor& s, int64_t dim, bool keepdim) {
  LT x = lz(s);
  const int64_t d = wrap_dim(dim, s.dim());
  if (s.dim() == 0) return {wrap(x.clone()), wrap(ll(0))};
  return {wrap(x.amin({d}, keepdim)), wrap(lazyx::argmin(x, d, keepdim))};
}
// A product asked for in bool is "all": the engine multiplies in int64 and the result is cast.
bool bool_prod(optional<c10::ScalarType> d) { return d.has_value() && *d == at::kBool; }
Tensor prod_k(const Tensor& s, optional<c10::ScalarType> d) {
  if (bool_prod(d)) return wrap(lazyx::prod(lz(s), lazyx::kInt64).to(lazyx::kBool));
  return wrap(lazyx::prod(lz(s), opt_dtype(d)));
}
Tensor prod_dim(const Tensor& s, int64_t dim, bool keepdim, optional<c10::ScalarType> d) {
  const int64_t w = wrap_dim(dim, s.dim());
  if (bool_prod(d)) return wrap(lazyx::prod(lz(s), w, keepdim, lazyx::kInt64).to(lazyx::kBool));
  return wrap(lazyx::prod(lz(s), w, keepdim, opt_dtype(d)));
}
Tensor& prod_out(const Tensor& s, int64_t dim, bool keepdim, optional<c10::ScalarType> d,
                 Tensor& out) {
  return write_out(out, lz(prod_dim(s, dim, keepdim, d)));
}
LT all_any(const Tensor& s, int64_t dim, bool keepdim, bool all) {
  LT x = lz(s);
  const lazyx::Dtype od = s.scalar_type() == at::kByte ? lazyx::kUInt8 : lazyx::kBool;
  if (s.dim() == 0) return x.ne(0).to(od);
  const int64_t d = wrap_dim(dim, s.dim());
  if (s.size(d) == 0) {
    Shape sh = to_shape(s.sizes());
    if (keepdim) sh[d] = 1; else sh.erase(sh.begin() + d);
    return lazyx::full(sh, all ? 1 : 0, od);
  }
  LT b = x.ne(0).to(lazyx::kInt32);
  return (all ? b.amin({d}, keepdim) : b.amax({d}, keepdim)).to(od);
}
Tensor all_dim(const Tensor& s, int64_t dim, bool keepdim) { return wrap(all_any(s, dim, keepdim, true)); }
Tensor any_dim(const Tensor& s, int64_t dim, bool keepdim) { return wrap(all_any(s, dim, keepdim, false)); }
Tensor& all_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& out) {
  return write_out(out, all_any(s, dim, keepdim, true));
}
Tensor& any_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& out) {
  return write_out(out, all_any(s, dim, keepdim, false));
}
std::vector<int64_t> dims_or_all(at::OptionalIntArrayRef dim, int64_t rank) {
  std::vector<int64_t> r;
  if (dim.has_value() && !dim->empty()) return to_dims(*dim);
  for (int64_t i = 0; i < rank; ++i) r.push_back(i);
  return r;
}
TT aminmax_k(const Tensor& s, optional<int64_t> dim, bool keepdim) {
  LT x = lz(s);
  if (s.dim() == 0) return {wrap(x.clone()), wrap(x.clone())};  // 0-d, with or without keepdim
  std::vector<int64_t> dims;
  if (dim.has_value()) dims = {wrap_dim(*dim, s.dim())};
  return {wrap(x.amin(dims, keepdim)), wrap(x.amax(dims, keepdim))};
}
TTr aminmax_out(const Tensor& s, optional<int64_t> dim, bool keepdim, Tensor& mn, Tensor& mx) {
  auto [a, b] = aminmax_k(s, dim, keepdim);
  return write_two(mn, mx, lz(a), lz(b));
}
Tensor nansum_k(const Tensor& s, at::OptionalIntArrayRef dim, bool keepdim,
              optional<c10::ScalarType> d) {
  LT x = lz(s);
  if (lazyx::is_floating(x.dtype())) x = lazyx::where(x.ne(x), lazyx::zeros({}, x.dtype()), x);
  else if (x.dtype() != lazyx::kInt64) x = x.to(lazyx::kInt64);
  if (d.has_value()) x = x.to(to_lz(*d));
  if (s.dim() == 0) return wrap(x.clone());
  return wrap(x.sum(dims_or_all(dim, s.dim()), keepdim));
}
Tensor& nansum_out(const Tensor& s, at::OptionalIntArrayRef dim, bool keepdim,
                   optional<c10::ScalarType> d, Tensor& out) {
  return write_out(out, lz(nansum_k(s, dim, keepdim, d)));
}
// nanmean.out: torch's own (a composite) calls the CPU nansum kernel directly; the functional form
// dispatches. Registered above autograd, as the composite is.
Tensor& nanmean_out(const Tensor& s, at::OptionalIntArrayRef dim, bool keepdim,
                    optional<c10::ScalarType> d, Tensor& out) {
  return write_out(out, lz(at::nanmean(s, dim, keepdim, d)));
}
Tensor count_nonzero(const Tensor& s, c10::IntArrayRef dim) {
  LT b = lz(s).ne(0).to(lazyx::kInt64);
  if (s.dim() == 0) return wrap(b);
  return wrap(b.sum(to_dims(dim)));
}
std::pair<LT, LT> var_mean_v(const Tensor& s, at::OptionalIntArrayRef dim,
                             const optional<c10::Scalar>& correction, bool keepdim) {
  LT x = lz(s);
  std::vector<int64_t> dims = dims_or_all(dim, s.dim());
  int64_t n = 1;
  for (int64_t d : dims) n *= s.dim() == 0 ? 1 : s.size(wrap_dim(d, s.dim()));
  if (s.dim() == 0) dims.clear();
  LT mean = x.mean(dims, true);
  LT xc = x.sub(mean);
  const double denom = std::max<double>(0.0, static_cast<double>(n) - correction_value(correction));
  LT var = xc.mul(xc).sum(dims, keepdim).div(denom);
  return {var, keepdim ? mean : x.mean(dims, false)};
}
TT var_mean(const Tensor& s, at::OptionalIntArrayRef dim, const optional<c10::Scalar>& c, bool keepdim) {
  auto [v, m] = var_mean_v(s, dim, c, keepdim);
  return {wrap(v), wrap(m)};
}
TT std_mean(const Tensor& s, at::OptionalIntArrayRef dim, const optional<c10::Scalar>& c, bool keepdim) {
  auto [v, m] = var_mean_v(s, dim, c, keepdim);
  return {wrap(v.sqrt()), wrap(m)};
}

// diag: a vector on the k-th diagonal of a square matrix, or the k-th diagonal of a matrix.
LT diag_v(const Tensor& s, int64_t k) {
  LT x = lz(s);
  TORCH_CHECK(s.dim() == 1 || s.dim() == 2, "[diag] expected a 1-D or 2-D tensor, got ", s.dim(), "-D.");
  if (s.dim() == 1) {
    const int64_t n = s.size(0), m = n + std::abs(k);
    LT r = lazyx::arange(0, m, 1, lazyx::kInt64).unsqueeze(1);
    LT c = lazyx::arange(0, m, 1, lazyx::kInt64).unsqueeze(0);
    LT on = c.sub(r).eq(li(k));
    LT src = k >= 0 ? r : c;  // position along the vector: the row (k >= 0) or the column
    LT pos = lazyx::where(on, src, ll(0)).reshape({m * m});
    LT vals = n == 0 ? lazyx::zeros({m * m}, x.dtype()) : x.index_select(0, pos.clamp(0, n - 1));
    return lazyx::where(on, vals.reshape({m, m}), lazyx::zeros({}, x.dtype()));
  }
  const int64_t R = s.size(0), C = s.size(1);
  const int64_t len = k >= 0 ? std::max<int64_t>(0, std::min(R, C - k))
                             : std::max<int64_t>(0, std::min(R + k, C));
  if (len == 0) return lazyx::zeros({0}, x.dtype());
  const int64_t off = k >= 0 ? k : -k * C;
  return x.contiguous().as_strided({len}, {C + 1}, off).clone();
}
Tensor& diag_out(const Tensor& s, int64_t k, Tensor& out) { return write_out(out, diag_v(s, k)); }
Tensor trace(const Tensor& s) {
  TORCH_CHECK(s.dim() == 2, "[trace] expected a matrix, got ", s.dim(), "-D.");
  LT d = diag_v(s, 0);
  LT x = lazyx::is_floating(d.dtype()) ? d : d.to(lazyx::kInt64);
  return wrap(d.numel() == 0 ? lazyx::zeros({}, x.dtype()) : x.sum());
}
LT eye_v(int64_t n, int64_t m, c10::ScalarType st) {
  TORCH_CHECK(n >= 0 && m >= 0, "[eye] n and m must be non-negative, got ", n, " and ", m, ".");
  LT r = lazyx::arange(0, n, 1, lazyx::kInt64).unsqueeze(1);
  LT c = lazyx::arange(0, m, 1, lazyx::kInt64).unsqueeze(0);
  return r.eq(c).to(to_lz(st));
}
Tensor& eye_out(int64_t n, Tensor& out) { return write_out(out, eye_v(n, n, out.scalar_type())); }
Tensor& eye_m_out(int64_t n, int64_t m, Tensor& out) {
  return write_out(out, eye_v(n, m, out.scalar_type()));
}

TORCH_LIBRARY_IMPL(aten, AutogradLazy, m) { impl(m, "nanmean.out", LZ_FN(nanmean_out)); }

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "tril", LZ_FN(tril));
  impl(m, "triu", LZ_FN(triu));
  impl(m, "tril.out", LZ_FN(tril_out));
  impl(m, "triu.out", LZ_FN(triu_out));
  impl(m, "tril_", LZ_FN(tril_));
  impl(m, "triu_", LZ_FN(triu_));
  impl(m, "flip", LZ_FN(flip));
  impl(m, "roll", LZ_FN(roll));
  impl(m, "cumsum", LZ_FN(cumsum));
  impl(m, "cumsum.out", LZ_FN(cumsum_out));
  impl(m, "cumsum_", LZ_FN(cumsum_));
  impl(m, "cumprod", LZ_FN(cumprod));
  impl(m, "cumprod.out", LZ_FN(cumprod_out));
  impl(m, "cumprod_", LZ_FN(cumprod_));
  impl(m, "_logcumsumexp", LZ_FN(logcumsumexp));
  impl(m, "_logcumsumexp.out", LZ_FN(logcumsumexp_out));
  impl(m, "_cummax_helper", LZ_FN(cummax_helper));
  impl(m, "_cummin_helper", LZ_FN(cummin_helper));
  impl(m, "sort.stable", LZ_FN(sort_stable));
  impl(m, "sort.values_stable", LZ_FN(sort_out));
  impl(m, "argsort.stable", LZ_FN(argsort_stable));
  impl(m, "topk", LZ_FN(topk));
  impl(m, "topk.values", LZ_FN(topk_out));
  impl(m, "kthvalue.values", LZ_FN(kthvalue_out));
  impl(m, "median", LZ_FN(median));
  impl(m, "nanmedian", LZ_FN(nanmedian));
  impl(m, "median.dim_values", LZ_FN(median_out));
  impl(m, "nanmedian.dim_values", LZ_FN(nanmedian_out));
  impl(m, "mode", LZ_FN(mode));
  impl(m, "mode.values", LZ_FN(mode_out));
  impl(m, "argmin", LZ_FN(argmin_k));
  impl(m, "argmin.out", LZ_FN(argmin_out));
  impl(m, "min.dim", LZ_FN(min_dim));
  impl(m, "prod", LZ_FN(prod_k));
  impl(m, "prod.dim_int", LZ_FN(prod_dim));
  impl(m, "prod.int_out", LZ_FN(prod_out));
  impl(m, "all.dim", LZ_FN(all_dim));
  impl(m, "any.dim", LZ_FN(any_dim));
  impl(m, "all.out", LZ_FN(all_out));
  impl(m, "any.out", LZ_FN(any_out));
  impl(m, "aminmax", LZ_FN(aminmax_k));
  impl(m, "aminmax.out", LZ_FN(aminmax_out));
  impl(m, "nansum", LZ_FN(nansum_k));
  impl(m, "nansum.out", LZ_FN(nansum_out));
  impl(m, "count_nonzero.dim_IntList", LZ_FN(count_nonzero));
  impl(m, "var_mean.correction", LZ_FN(var_mean));
  impl(m, "std_mean.correction", LZ_FN(std_mean));
  impl(m, "diag.out", LZ_FN(diag_out));
  impl(m, "trace", LZ_FN(trace));
  impl(m, "eye.out", LZ_FN(eye_out));
  impl(m, "eye.m_out", LZ_FN(eye_m_out));
}

}  // namespace

}  // namespace lazyx_bridge
