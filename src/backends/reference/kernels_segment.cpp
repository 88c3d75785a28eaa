// Segment reductions along dim 1 of [O, N, I] with int64 offsets [O, S + 1], and their
// gradient, in the data's precision as PyTorch's CPU kernel (the offsets are checked first);
// histogram bins as PyTorch's histogram kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

namespace {

enum Kind : int64_t { kSum = 0, kMean = 1, kMax = 2, kMin = 3, kProd = 4 };

struct Seg {
  int64_t O, N, I, S;
  Kind kind;
  bool has_initial;
  double initial;
  const int64_t* off;
};

// Every segment lies inside the axis, in order; `safe` also wants them to cover it exactly.
void check_offsets(const char* op, const Seg& s, bool safe) {
  for (int64_t o = 0; o < s.O; ++o) {
    const int64_t* r = s.off + o * (s.S + 1);
    for (int64_t k = 0; k <= s.S; ++k) {
      if (r[k] < 0 || r[k] > s.N || (k > 0 && r[k] < r[k - 1])) {
        ir::fail(op, "offset " + std::to_string(k) + " of row " + std::to_string(o) + " is " +
                         std::to_string(r[k]) + ": a negative length or a segment beyond the " +
                         "axis of " + std::to_string(s.N) +
                         " (found while running the program; nothing was changed); pass "
                         "non-negative lengths within the axis.");
      }
    }
    if (safe && (r[0] != 0 || r[s.S] != s.N)) {
      ir::fail(op, "the lengths of row " + std::to_string(o) + " sum to " +
                       std::to_string(r[s.S] - r[0]) + ", not the axis size " +
                       std::to_string(s.N) +
                       " (found while running the program; nothing was changed); make them "
                       "sum to it or pass unsafe=True.");
    }
  }
}

Seg seg_of(const backend::Instr& in, const Val& data, const Val& off, const Val& initial) {
  Seg s;
  s.O = data.shape[0];
  s.N = data.shape[1];
  s.I = data.shape[2];
  s.S = off.shape[1] - 1;
  s.kind = static_cast<Kind>(in.attrs.ints[0]);
  s.has_initial = in.attrs.ints[1] != 0;
  s.initial = get_f(initial, 0);
  s.off = reinterpret_cast<const int64_t*>(off.data);
  return s;
}

template <typename T>
T start_value(const Seg& s) {
  if (s.has_initial) return static_cast<T>(s.initial);
  switch (s.kind) {
    case kMax:
      return -std::numeric_limits<T>::infinity();
    case kMin:
      return std::numeric_limits<T>::infinity();
    case kProd:
      return T(1);
    default:
      return T(0);
  }
}

template <typename T>
void forward(const Seg& s, const T* x, T* out) {
  for (int64_t o = 0; o < s.O; ++o) {
    const int64_t* r = s.off + o * (s.S + 1);
    for (int64_t k = 0; k < s.S; ++k) {
      const int64_t len = r[k + 1] - r[k];
      for (int64_t i = 0; i < s.I; ++i) {
        T v = start_value<T>(s);
        for (int64_t j = r[k]; j < r[k + 1]; ++j) {
          const T d = x[(o * s.N + j) * s.I + i];
          switch (s.kind) {
            case kMax:
              v = std::isnan(d) ? d : std::max(v, d);
              break;
            case kMin:
              v = std::isnan(d) ? d : std::min(v, d);
              break;
            case kProd:
              v = v * d;
              break;
            default:
              v = v + d;
              break;
          }
        }
        if (s.kind == kMean) {
          if (len == 0 && !s.has_initial) {
            v = std::numeric_limits<T>::quiet_NaN();
          } else if (len > 0 && !std::isnan(v)) {
            v = v / static_cast<T>(len);
          }
        }
        out[(o * s.S + k) * s.I + i] = v;
      }
    }
  }
}

// One segment's gradient along column i: rows [b, e) of x and gin at stride I.
template <typename T>
void segment_grad(const Seg& s, const T* x, T* gin, int64_t b, int64_t e, T g, T y) {
  const int64_t I = s.I, len = e - b;
  if (s.kind == kMax || s.kind == kMin) {
    int64_t count = 0;
    for (int64_t j = b; j < e; ++j) {
      if (std::isnan(x[j * I]) || x[j * I] == y) {
        gin[j * I] = g;
        count++;
      }
    }
    if (count < 2) return;
    // As eager: only positive shares are divided among the ties.
    for (int64_t j = b; j < e; ++j) {
      if (gin[j * I] > T(0)) gin[j * I] = gin[j * I] / static_cast<T>(count);
    }
  } else if (s.kind == kMean || s.kind == kSum) {
    const T v = s.kind == kMean ? g / static_cast<T>(len) : g;
    for (int64_t j = b; j < e; ++j) gin[j * I] = v;
  } else {
    const T gy = g * y;
    for (int64_t j = b; j < e; ++j) {
      if (!std::isnan(x[j * I]) && x[j * I] != T(0)) {
        gin[j * I] = gy / x[j * I];
        continue;
      }
      T excl = s.has_initial ? static_cast<T>(s.initial) : T(1);
      for (int64_t k = b; k < e; ++k) {
        if (k != j) excl *= x[k * I];
      }
      gin[j * I] = g * excl;
    }
  }
}

template <typename T>
void backward(const Seg& s, const T* grad, const T* y, const T* x, T* gin) {
  for (int64_t i = 0; i < s.O * s.N * s.I; ++i) gin[i] = T(0);
  for (int64_t o = 0; o < s.O; ++o) {
    const int64_t* r = s.off + o * (s.S + 1);
    for (int64_t k = 0; k < s.S; ++k) {
      if (r[k + 1] == r[k]) continue;
      for (int64_t i = 0; i < s.I; ++i) {
        const int64_t at = (o * s.S + k) * s.I + i;
        const int64_t base = o * s.N * s.I + i;
        segment_grad<T>(s, x + base, gin + base, r[k], r[k + 1], grad[at], y[at]);
      }
    }
  }
}

template <typename T>
void run_typed(const backend::Instr& in, const std::vector<const Val*>& a, const Val& out) {
  auto p = [](const Val* v) { return reinterpret_cast<const T*>(v->data); };
  T* o = reinterpret_cast<T*>(out.data);
  if (in.op == ir::Op::SegmentReduce)
    return forward<T>(seg_of(in, *a[0], *a[1], *a[2]), p(a[0]), o);
  backward<T>(seg_of(in, *a[2], *a[3], *a[4]), p(a[0]), p(a[1]), p(a[2]), o);
}

// std::upper_bound's probe sequence over [first, last): the same answer on unsorted edges.
template <typename T>
int64_t upper_bound(const T* e, int64_t first, int64_t last, T v) {
  int64_t len = last - first;
  while (len > 0) {
    const int64_t half = len >> 1, mid = first + half;
    if (v < e[mid]) {
      len = half;
    } else {
      first = mid + 1;
      len = len - half - 1;
    }
  }
  return first;
}

template <typename T>
void histogram(const Val& x, const Val& edges, const Val* w, bool linear, const Val& out) {
  const T* xs = reinterpret_cast<const T*>(x.data);
  const T* e = reinterpret_cast<const T*>(edges.data);
  const T* ws = w ? reinterpret_cast<const T*>(w->data) : nullptr;
  T* h = reinterpret_cast<T*>(out.data);
  const int64_t E = edges.numel(), M = x.numel();
  const T lo = e[0], hi = e[E - 1];
  if (linear && !(std::isfinite(lo) && std::isfinite(hi))) {
    ir::fail("histogram", "range of [" + std::to_string(lo) + ", " + std::to_string(hi) +
                              "] is not finite (found while running the program; nothing was "
                              "changed); pass a finite range or remove inf and NaN first.");
  }
  for (int64_t b = 0; b + 1 < E; ++b) h[b] = T(0);
  for (int64_t i = 0; i < M; ++i) {
    const T v = xs[i];
    if (!(v >= lo && v <= hi)) continue;
    int64_t pos;
    if (linear) {
      const T q = (v - lo) * static_cast<T>(E - 1) / (hi - lo);
      pos = q >= T(0) && q < static_cast<T>(E) ? static_cast<int64_t>(q) : 0;
      pos = upper_bound(e, std::max<int64_t>(0, pos - 1), std::min(pos + 2, E), v) - 1;
    } else {
      pos = upper_bound(e, 0, E, v) - 1;
    }
    if (pos == E - 1) pos -= 1;
    if (pos < 0 || pos >= E - 1) continue;  // only unsorted edges get here
    h[pos] += ws ? ws[i] : T(1);
  }
}

}  // namespace

void run_histogram(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out) {
  const Val* w = args.size() > 2 ? args[2] : nullptr;
  const bool linear = in.attrs.i0 == 1;
  if (out.dtype == kFloat32) return histogram<float>(*args[0], *args[1], w, linear, out);
  if (out.dtype == kFloat64) return histogram<double>(*args[0], *args[1], w, linear, out);
  ir::fail("histogram", std::string("internal: no kernel for dtype ") + dtype_name(out.dtype) +
                            "; float32 and float64 only.");
}

void run_segment_reduce(const backend::Instr& in, const std::vector<const Val*>& args,
                        const Val& out) {
  const char* op = ir::op_name(in.op);
  const bool fwd = in.op == ir::Op::SegmentReduce;
  const Val& data = fwd ? *args[0] : *args[2];
  const Seg s = seg_of(in, data, fwd ? *args[1] : *args[3], fwd ? *args[2] : *args[4]);
  check_offsets(op, s, fwd && in.attrs.ints[2] != 0);
  if (out.dtype == kFloat32) return run_typed<float>(in, args, out);
  if (out.dtype == kFloat64) return run_typed<double>(in, args, out);
  ir::fail(op, std::string("internal: no kernel for dtype ") + dtype_name(out.dtype) +
                   "; float32 and float64 only.");
}

}  // namespace lazyx::reference
