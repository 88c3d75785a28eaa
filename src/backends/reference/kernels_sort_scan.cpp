// Sort (stable argsort) and Scan, as plain loops along one dim in double or int64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <numeric>

#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"
#include "lazyx/sort.h"

namespace lazyx::reference {

namespace {

// The lines along `dim`: outer * inner lines of n elements, `inner` apart.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

Lines lines_of(const Shape& shape, int64_t dim) {
  Lines l;
  if (shape.empty()) return l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= shape[d];
  l.n = shape[dim];
  for (size_t d = dim + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

template <typename F>
void for_each_line(const Lines& l, F f) {
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t i = 0; i < l.inner; ++i) f(o * l.n * l.inner + i);
  }
}

// Eager's comparators (NaN largest): "a goes before b".
template <typename T>
bool before(T a, T b, bool desc) {
  const bool na = a != a, nb = b != b;
  return desc ? ((na && !nb) || a > b) : ((!na && nb) || a < b);
}

// Quickselect of the k-th element (Sedgewick's partition, as eager's kthvalue).
template <typename T>
void quick_select(std::vector<std::pair<T, int64_t>>& q, int64_t k) {
  auto gt = [](T x, T y) { return before(x, y, true); };
  int64_t L = 0, R = static_cast<int64_t>(q.size()) - 1;
  while (R > L) {
    if (R == L + 1) {
      if (gt(q[L].first, q[R].first)) std::swap(q[L], q[R]);
      return;
    }
    std::swap(q[(L + R) >> 1], q[L + 1]);
    if (gt(q[L + 1].first, q[R].first)) std::swap(q[L + 1], q[R]);
    if (gt(q[L].first, q[R].first)) std::swap(q[L], q[R]);
    if (gt(q[L + 1].first, q[L].first)) std::swap(q[L + 1], q[L]);
    int64_t i = L + 1, j = R;
    const T piv = q[L].first;
    while (true) {
      do ++i; while (gt(piv, q[i].first));
      do --j; while (gt(q[j].first, piv));
      if (j < i) break;
      std::swap(q[i], q[j]);
    }
    std::swap(q[L], q[j]);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}

// Orders one line as the mode asks (lazyx::SortMode); ties go the way eager's CPU kernels
// send them.
template <typename T>
void sort_line(const std::vector<T>& v, std::vector<int64_t>& idx, bool desc, int64_t mode,
               int64_t k) {
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<std::pair<T, int64_t>> q(n);
  for (int64_t j = 0; j < n; ++j) q[j] = {v[j], j};
  auto cmp = [desc](const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) {
    return before(a.first, b.first, desc);
  };
  if (mode == 0) {
    std::stable_sort(q.begin(), q.end(), cmp);
  } else if (mode == 1) {
    std::sort(q.begin(), q.end(), cmp);
  } else if (mode == 2 && k > 0 && k * 64 <= n) {
    std::partial_sort(q.begin(), q.begin() + k, q.end(), cmp);
  } else if (mode == 2 && k > 0) {
    std::nth_element(q.begin(), q.begin() + k - 1, q.end(), cmp);
    std::sort(q.begin(), q.begin() + k - 1, cmp);
  } else if (mode == 3 && k > 0) {
    quick_select(q, k - 1);
  }
  for (int64_t j = 0; j < n; ++j) idx[j] = q[j].second;
}

}  // namespace

void run_sort(const backend::Instr& in, const Val& src, const Val& out) {
  const Lines l = lines_of(src.shape, in.attrs.i0);
  const bool fl = float_domain(src.dtype), desc = in.attrs.flag;
  const int64_t mode = in.attrs.ints.empty() ? 0 : in.attrs.ints[0];
  const int64_t k = in.attrs.ints.size() > 1 ? in.attrs.ints[1] : 0;
  std::vector<double> vf(fl ? l.n : 0);
  std::vector<int64_t> vi(fl ? 0 : l.n), idx(l.n);
  for_each_line(l, [&](int64_t base) {
    for (int64_t j = 0; j < l.n; ++j) {
      if (fl) vf[j] = get_f(src, base + j * l.inner);
      else vi[j] = get_i(src, base + j * l.inner);
    }
    if (fl) sort_line(vf, idx, desc, mode, k);
    else sort_line(vi, idx, desc, mode, k);
    for (int64_t j = 0; j < l.n; ++j) set_i(out, base + j * l.inner, idx[j]);
  });
}

namespace {

double log_add_exp(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  const double m = std::max(a, b);
  if (std::isinf(m) && m < 0) return m;
  if (std::isinf(m)) return m;
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

// Running max/min value and its index, as PyTorch: a NaN always takes over, then stays.
template <typename T>
void extreme_line(const std::vector<T>& v, bool max, std::vector<T>& val,
                  std::vector<int64_t>& arg) {
  auto isnan_ = [](T x) { return x != x; };
  T cur = v[0];
  int64_t at = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    const T x = v[k];
    if (isnan_(x) || (!isnan_(cur) && (max ? x >= cur : x <= cur))) {
      cur = x;
      at = static_cast<int64_t>(k);
    }
    val[k] = cur;
    arg[k] = at;
  }
}

void scan_float(ScanKind kind, std::vector<double>& v) {
  for (size_t k = 1; k < v.size(); ++k) {
    switch (kind) {
      case ScanKind::Sum: v[k] += v[k - 1]; break;
      case ScanKind::Prod: v[k] *= v[k - 1]; break;
      default: v[k] = log_add_exp(v[k - 1], v[k]); break;
    }
  }
}

void scan_int(ScanKind kind, std::vector<int64_t>& v) {
  for (size_t k = 1; k < v.size(); ++k) {
    const auto a = static_cast<uint64_t>(v[k - 1]), b = static_cast<uint64_t>(v[k]);
    v[k] = static_cast<int64_t>(kind == ScanKind::Sum ? a + b : a * b);  // wraps as eager
  }
}

template <typename T>
void scan_line(ScanKind kind, std::vector<T>& v, std::vector<int64_t>& arg) {
  if (v.empty()) return;
  const bool is_max = kind == ScanKind::Max || kind == ScanKind::ArgMax;
  if (kind == ScanKind::Sum || kind == ScanKind::Prod || kind == ScanKind::LogSumExp) {
    if constexpr (std::is_same_v<T, double>) scan_float(kind, v);
    else scan_int(kind, v);
    return;
  }
  std::vector<T> val(v.size());
  extreme_line(v, is_max, val, arg);
  v = val;
}

}  // namespace

void run_scan(const backend::Instr& in, const Val& src, const Val& out) {
  const Lines l = lines_of(src.shape, in.attrs.i0);
  const auto kind = static_cast<ScanKind>(in.attrs.ints.at(0));
  const bool want_arg = kind == ScanKind::ArgMax || kind == ScanKind::ArgMin;
  const bool fl = float_domain(src.dtype) || kind == ScanKind::LogSumExp;
  std::vector<double> vf(fl ? l.n : 0);
  std::vector<int64_t> vi(fl ? 0 : l.n), arg(l.n);
  for_each_line(l, [&](int64_t base) {
    for (int64_t k = 0; k < l.n; ++k) {
      if (fl) vf[k] = get_f(src, base + k * l.inner);
      else vi[k] = get_i(src, base + k * l.inner);
    }
    if (fl) scan_line(kind, vf, arg);
    else scan_line(kind, vi, arg);
    for (int64_t k = 0; k < l.n; ++k) {
      const int64_t o = base + k * l.inner;
      if (want_arg) set_i(out, o, arg[k]);
      else if (fl) set_f(out, o, vf[k]);
      else set_i(out, o, vi[k]);
    }
  });
}

}  // namespace lazyx::reference

namespace lazyx::reference {

namespace {

template <typename T>
T combine(ScatterKind k, T a, T b) {
  if (k == ScatterKind::Prod) return a * b;
  if (a != a) return a;  // NaN stays
  if (b != b) return b;
  return k == ScatterKind::Amax ? std::max(a, b) : std::min(a, b);
}

}  // namespace

void run_scatter_reduce(const backend::Instr& in, const std::vector<const Val*>& args,
                        const Val& out) {
  const Val &self = *args[0], &idx = *args[1], &src = *args[2];
  const int64_t d = in.attrs.i0;
  const auto kind = static_cast<ScatterKind>(in.attrs.ints.at(0));
  const bool include_self = in.attrs.ints.at(1) != 0;
  const int64_t size = self.shape.empty() ? 1 : self.shape[d];
  for (int64_t k = 0; k < idx.numel(); ++k) {  // before any write: a bad index changes nothing
    const int64_t v = get_i(idx, k);
    if (v < 0 || v >= size) {
      ir::fail("scatter_reduce", "index " + std::to_string(v) + " is out of range for a "
               "dimension of size " + std::to_string(size) + " (found while running the "
               "program; nothing was changed).");
    }
  }
  const size_t es = dtype_size(out.dtype);
  if (out.data != self.data) std::memcpy(out.data, self.data, self.numel() * es);
  const Shape st = ir::contiguous_strides(self.shape), sst = ir::contiguous_strides(src.shape);
  const Shape ist = ir::contiguous_strides(idx.shape);
  std::vector<char> seen(include_self ? 0 : out.numel(), 0);
  const bool fl = float_domain(out.dtype);
  for (int64_t k = 0; k < idx.numel(); ++k) {
    int64_t off = 0, soff = 0, rem = k;
    for (size_t q = 0; q < idx.shape.size(); ++q) {
      const int64_t c = rem / ist[q];
      rem %= ist[q];
      off += (static_cast<int64_t>(q) == d ? get_i(idx, k) : c) * st[q];
      soff += c * sst[q];
    }
    const bool first = !include_self && !seen[off];
    if (!include_self) seen[off] = 1;
    if (fl) {
      const double s = get_f(src, soff);
      set_f(out, off, first ? s : combine(kind, get_f(out, off), s));
    } else {
      const int64_t s = get_i(src, soff);
      set_i(out, off, first ? s : combine(kind, get_i(out, off), s));
    }
  }
}

}  // namespace lazyx::reference
