// Tap-table kernels (pooling, resampling, padding): plain loops, typed for float and double,
// element conversions for the other dtypes. Every tap index is checked before anything is written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

using ir::Op;

namespace {

void check_taps(const char* op, const Val& idx, int64_t size) {
  const int64_t* p = reinterpret_cast<const int64_t*>(idx.data);
  for (int64_t i = 0, n = idx.numel(); i < n; ++i) {
    if (p[i] < 0 || p[i] >= size) {
      ir::fail(op, "index " + std::to_string(p[i]) + " is out of range for a plane of " +
                       std::to_string(size) +
                       " elements (found while running the program; "
                       "nothing was changed); pass indices from the matching max pooling.");
    }
  }
}

template <typename T>
void tap_sum(const Val& x, const int64_t* idx, const Val& w, const Val& out, int64_t K) {
  const int64_t B = out.shape[0], P = out.shape[1], L = x.shape[1];
  const T* xs = reinterpret_cast<const T*>(x.data);
  const T* ws = reinterpret_cast<const T*>(w.data);
  T* o = reinterpret_cast<T*>(out.data);
  for (int64_t b = 0; b < B; ++b) {
    const T* row = xs + b * L;
    for (int64_t p = 0; p < P; ++p) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += row[idx[p * K + k]] * ws[p * K + k];
      o[b * P + p] = acc;
    }
  }
}

// The first maximum of each row of taps; a NaN wins (the last one, as PyTorch's CPU loops).
// Four outputs at a time, branch-free: independent chains instead of one mispredicted one.
template <typename T>
void tap_max(const Val& x, const int64_t* idx, const Val& out, int64_t K, bool want_index) {
  const int64_t B = out.shape[0], P = out.shape[1], L = x.shape[1];
  const T* xs = reinterpret_cast<const T*>(x.data);
  constexpr int64_t U = 4;
  for (int64_t b = 0; b < B; ++b) {
    const T* row = xs + b * L;
    for (int64_t p0 = 0; p0 < P; p0 += U) {
      const int64_t n = std::min(U, P - p0);
      int64_t best[U];
      T bv[U];
      for (int64_t u = 0; u < n; ++u) {
        best[u] = idx[(p0 + u) * K];
        bv[u] = row[best[u]];
      }
      for (int64_t k = 1; k < K; ++k) {
        for (int64_t u = 0; u < n; ++u) {
          const int64_t t = idx[(p0 + u) * K + k];
          const T v = row[t];
          const bool take = (v > bv[u]) | (v != v);
          bv[u] = take ? v : bv[u];
          best[u] = take ? t : best[u];
        }
      }
      for (int64_t u = 0; u < n; ++u) {
        if (want_index) {
          reinterpret_cast<int64_t*>(out.data)[b * P + p0 + u] = best[u];
        } else {
          reinterpret_cast<T*>(out.data)[b * P + p0 + u] = bv[u];
        }
      }
    }
  }
}

void tap_max_any(const Val& x, const int64_t* idx, const Val& out, int64_t K, bool want_index) {
  const int64_t B = out.shape[0], P = out.shape[1], L = x.shape[1];
  const size_t es = dtype_size(x.dtype);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p = 0; p < P; ++p) {
      const int64_t* t = idx + p * K;
      int64_t best = t[0];
      double bv = get_f(x, b * L + best);
      for (int64_t k = 1; k < K; ++k) {
        const double v = get_f(x, b * L + t[k]);
        if (v > bv || std::isnan(v)) {
          bv = v;
          best = t[k];
        }
      }
      if (want_index) {
        set_i(out, b * P + p, best);
      } else {
        std::memcpy(out.data + (b * P + p) * es, x.data + (b * L + best) * es, es);
      }
    }
  }
}

template <typename T>
void tap_scatter(const Val& g, const int64_t* idx, bool per_row, const Val* w, const Val& out,
                 int64_t K) {
  const int64_t B = g.shape[0], P = g.shape[1], L = out.shape[1];
  const T* gs = reinterpret_cast<const T*>(g.data);
  const T* ws = w ? reinterpret_cast<const T*>(w->data) : nullptr;
  T* o = reinterpret_cast<T*>(out.data);
  for (int64_t i = 0; i < B * L; ++i) o[i] = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* t = per_row ? idx + b * P * K : idx;
    for (int64_t p = 0; p < P; ++p) {
      const T gv = gs[b * P + p];
      for (int64_t k = 0; k < K; ++k) {
        o[b * L + t[p * K + k]] += ws ? gv * ws[p * K + k] : gv;
      }
    }
  }
}

void tap_scatter_any(const Val& g, const int64_t* idx, bool per_row, const Val* w, const Val& out,
                     int64_t K) {
  const int64_t B = g.shape[0], P = g.shape[1], L = out.shape[1];
  std::vector<double> acc(static_cast<size_t>(B * L), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* t = per_row ? idx + b * P * K : idx;
    for (int64_t p = 0; p < P; ++p) {
      const double gv = get_f(g, b * P + p);
      for (int64_t k = 0; k < K; ++k) {
        acc[b * L + t[p * K + k]] += w ? gv * get_f(*w, p * K + k) : gv;
      }
    }
  }
  for (int64_t i = 0; i < B * L; ++i) set_f(out, i, acc[i]);
}

}  // namespace

void run_taps(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out) {
  const char* op = ir::op_name(in.op);
  const Val& a = *args[0];
  const Val& idx = *args[1];
  const int64_t* ip = reinterpret_cast<const int64_t*>(idx.data);
  if (in.op == Op::TapScatter) {
    const int64_t L = in.attrs.ints[0], K = in.attrs.ints[1];
    check_taps(op, idx, L);
    const bool per_row = idx.numel() != a.shape[1] * K;
    const Val* w = args.size() > 2 ? args[2] : nullptr;
    if (out.dtype == kFloat32) return tap_scatter<float>(a, ip, per_row, w, out, K);
    if (out.dtype == kFloat64) return tap_scatter<double>(a, ip, per_row, w, out, K);
    return tap_scatter_any(a, ip, per_row, w, out, K);
  }
  const int64_t K = in.attrs.ints[0];
  check_taps(op, idx, a.shape[1]);
  if (in.op == Op::TapSum) {
    if (out.dtype == kFloat32) return tap_sum<float>(a, ip, *args[2], out, K);
    if (out.dtype == kFloat64) return tap_sum<double>(a, ip, *args[2], out, K);
    const int64_t B = out.shape[0], P = out.shape[1], L = a.shape[1];
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t p = 0; p < P; ++p) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += get_f(a, b * L + ip[p * K + k]) * get_f(*args[2], p * K + k);
        }
        set_f(out, b * P + p, acc);
      }
    }
    return;
  }
  const bool want_index = in.attrs.flag;
  if (a.dtype == kFloat32) return tap_max<float>(a, ip, out, K, want_index);
  if (a.dtype == kFloat64) return tap_max<double>(a, ip, out, K, want_index);
  tap_max_any(a, ip, out, K, want_index);
}

namespace {

Val rows_of(const Val& v, int64_t b0, int64_t b1) {
  Val r = v;
  const int64_t row = v.shape.empty() || v.shape[0] == 0 ? 0 : v.numel() / v.shape[0];
  r.data = v.data + b0 * row * static_cast<int64_t>(dtype_size(v.dtype));
  r.shape[0] = b1 - b0;
  return r;
}

}  // namespace

int64_t taps_per_row(const backend::Instr& in, const std::vector<const Val*>& args) {
  const int64_t K = in.op == Op::TapScatter ? in.attrs.ints[1] : in.attrs.ints[0];
  const Val& a = *args[0];
  const int64_t cols =
      in.op == Op::TapScatter ? a.shape[1] : args[1]->numel() / std::max<int64_t>(K, 1);
  return std::max<int64_t>(1, cols * K);
}

void run_taps_rows(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out,
                   int64_t b0, int64_t b1) {
  Val a = rows_of(*args[0], b0, b1), idx = *args[1];
  const Val o = rows_of(out, b0, b1);
  // TapScatter's per-row taps ([B, P * K]) split with the rows; shared taps do not.
  if (in.op == Op::TapScatter && idx.numel() != args[0]->shape[1] * in.attrs.ints[1]) {
    idx.shape = {args[0]->shape[0], idx.numel() / std::max<int64_t>(args[0]->shape[0], 1)};
    idx = rows_of(idx, b0, b1);
    idx.shape = {idx.numel()};
  }
  std::vector<const Val*> sub = {&a, &idx};
  for (size_t i = 2; i < args.size(); ++i) sub.push_back(args[i]);
  run_taps(in, sub, o);
}

}  // namespace lazyx::reference
