// Grid sampling (bilinear, nearest, bicubic; zeros, border and reflection padding) and its
// gradients, as PyTorch's vectorized CPU kernel computes them: the same formulas in the same
// precision (float or double), one output point at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

namespace {

enum Mode : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Pad : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// An index far outside any plane for coordinates that do not convert (NaN, huge).
constexpr int64_t kFar = INT64_MIN / 4;

template <typename T>
int64_t to_index(T v) {
  return v > T(-1e9) && v < T(1e9) ? static_cast<int64_t>(v) : kFar;
}

// One spatial dim: unnormalization, padding and their derivative.
template <typename T>
struct Axis {
  int64_t size;
  Pad pad;
  bool align;
  T max_val, scale, low, twice_span;
  bool empty;

  Axis(int64_t n, Pad p, bool a)
      : size(n),
        pad(p),
        align(a),
        max_val(static_cast<T>(n - 1)),
        scale(a ? static_cast<T>(n - 1) / 2 : static_cast<T>(n) / 2),
        low(a ? T(0) : T(-0.5)),
        twice_span(a ? static_cast<T>(n - 1) * 2 : static_cast<T>(n) * 2),
        empty(a ? n <= 1 : n <= 0) {}

  T unnormalize(T g) const { return align ? (g + T(1)) * scale : (g + T(1)) * scale - T(0.5); }
  // Clamped to [0, size - 1]; NaN becomes 0.
  T clip(T v) const {
    const T r = v > T(0) ? v : T(0);
    return r < max_val ? r : max_val;
  }
  // Reflected into [low, low + span]; *grad gets the derivative's sign.
  T reflect(T v, T* grad) const {
    if (empty) {
      if (grad) *grad = T(0);
      return T(0);
    }
    const T in = v - low;
    const T a = std::fabs(in);
    const T flips = std::trunc(a / twice_span);
    const T extra = a - flips * twice_span;
    const T reflected = twice_span - extra;
    const bool more = extra > reflected;
    if (grad) *grad = more != (in < T(0)) ? T(-1) : T(1);
    return (more ? reflected : extra) + low;
  }
  // Padding applied to an unnormalized coordinate.
  T pad_coord(T v) const {
    if (pad == kBorder) return clip(v);
    if (pad == kReflection) return clip(reflect(v, nullptr));
    return v;
  }
  T apply(T g) const { return pad_coord(unnormalize(g)); }
  // apply() and d apply / d g (borders count as outside: gradient 0 there).
  T apply_grad(T g, T* grad) const {
    T v = unnormalize(g), gr = scale;
    if (pad == kZeros) {
      *grad = gr;
      return v;
    }
    if (pad == kReflection) {
      T sign;
      v = reflect(v, &sign);
      gr = sign * gr;
    }
    *grad = v > T(0) && v < max_val ? gr : T(0);
    return clip(v);
  }
};

struct Geom {
  int64_t N, C, H, W, Ho, Wo;
  Mode mode;
  Pad pad;
  bool align;
};

Geom geom_of(const backend::Instr& in, const Val& input, const Val& grid) {
  Geom g;
  g.N = input.shape[0];
  g.C = input.shape[1];
  g.H = input.shape[2];
  g.W = input.shape[3];
  g.Ho = grid.shape[1];
  g.Wo = grid.shape[2];
  g.mode = static_cast<Mode>(in.attrs.ints[0]);
  g.pad = static_cast<Pad>(in.attrs.ints[1]);
  g.align = in.attrs.ints[2] != 0;
  return g;
}

template <typename T>
void cubic_coeffs(T t, T c[4]) {
  const T A = T(-0.75);
  T x = t + T(1);
  c[0] = ((A * x - T(5) * A) * x + T(8) * A) * x - T(4) * A;
  x = t;
  c[1] = ((A + T(2)) * x - (A + T(3))) * x * x + T(1);
  x = T(1) - t;
  c[2] = ((A + T(2)) * x - (A + T(3))) * x * x + T(1);
  x = T(2) - t;
  c[3] = ((A * x - T(5) * A) * x + T(8) * A) * x - T(4) * A;
}

template <typename T>
void cubic_grads(T t, T c[4]) {
  const T A = T(-0.75);
  T x = T(-1) - t;
  c[0] = (T(-3) * A * x - T(10) * A) * x - T(8) * A;
  x = T(0) - t;
  c[1] = (T(-3) * (A + T(2)) * x - T(2) * (A + T(3))) * x;
  x = T(1) - t;
  c[2] = (T(3) * (A + T(2)) * x - T(2) * (A + T(3))) * x;
  x = T(2) - t;
  c[3] = (T(3) * A * x - T(10) * A) * x + T(8) * A;
}

// The plane offset of tap (x, y), or -1 when it reads zero.
inline int64_t tap(int64_t ix, int64_t iy, int64_t H, int64_t W) {
  return ix >= 0 && ix < W && iy >= 0 && iy < H ? iy * W + ix : -1;
}

// Bilinear corners of (x, y): offsets (-1: zero) and weights, nw ne sw se.
template <typename T>
struct Corners {
  int64_t off[4];
  T wt[4];
  T n, s, w, e;
  Corners(T x, T y, int64_t H, int64_t W) {
    const T xw = std::floor(x), yn = std::floor(y);
    w = x - xw;
    e = T(1) - w;
    n = y - yn;
    s = T(1) - n;
    wt[0] = s * e;
    wt[1] = s * w;
    wt[2] = n * e;
    wt[3] = n * w;
    const int64_t ix = to_index(xw), iy = to_index(yn);
    off[0] = tap(ix, iy, H, W);
    off[1] = tap(ix + 1, iy, H, W);
    off[2] = tap(ix, iy + 1, H, W);
    off[3] = tap(ix + 1, iy + 1, H, W);
  }
};

template <typename T>
inline T at(const T* plane, int64_t off) {
  return off >= 0 ? plane[off] : T(0);
}

// The offset of bicubic tap (x, y) after padding, or -1.
template <typename T>
int64_t cubic_tap(const Axis<T>& ax, const Axis<T>& ay, T x, T y) {
  return tap(to_index(ax.pad_coord(x)), to_index(ay.pad_coord(y)), ay.size, ax.size);
}

template <typename T>
void forward(const Geom& g, const T* inp, const T* grid, T* out, int64_t n0, int64_t n1) {
  const Axis<T> ax(g.W, g.pad, g.align), ay(g.H, g.pad, g.align);
  const int64_t P = g.Ho * g.Wo, L = g.H * g.W;
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t p = 0; p < P; ++p) {
      const T gx = grid[(n * P + p) * 2], gy = grid[(n * P + p) * 2 + 1];
      for (int64_t c = 0; c < g.C; ++c) {
        const T* plane = inp + (n * g.C + c) * L;
        T r;
        if (g.mode == kBilinear) {
          const Corners<T> k(ax.apply(gx), ay.apply(gy), g.H, g.W);
          r = at(plane, k.off[0]) * k.wt[0] + at(plane, k.off[1]) * k.wt[1] +
              at(plane, k.off[2]) * k.wt[2] + at(plane, k.off[3]) * k.wt[3];
        } else if (g.mode == kNearest) {
          const int64_t ix = to_index(std::nearbyint(ax.apply(gx)));
          const int64_t iy = to_index(std::nearbyint(ay.apply(gy)));
          r = at(plane, tap(ix, iy, g.H, g.W));
        } else {
          const T x = ax.unnormalize(gx), y = ay.unnormalize(gy);
          const T fx = std::floor(x), fy = std::floor(y);
          T cx[4], cy[4], row[4];
          cubic_coeffs(x - fx, cx);
          cubic_coeffs(y - fy, cy);
          for (int i = 0; i < 4; ++i) {
            const T yy = fy + T(-1 + i);
            row[i] = cx[0] * at(plane, cubic_tap(ax, ay, fx - T(1), yy)) +
                     cx[1] * at(plane, cubic_tap(ax, ay, fx + T(0), yy)) +
                     cx[2] * at(plane, cubic_tap(ax, ay, fx + T(1), yy)) +
                     cx[3] * at(plane, cubic_tap(ax, ay, fx + T(2), yy));
          }
          r = cy[0] * row[0] + cy[1] * row[1] + cy[2] * row[2] + cy[3] * row[3];
        }
        out[(n * g.C + c) * P + p] = r;
      }
    }
  }
}

// The input's gradient: each output point's taps scatter-added with their weights.
template <typename T>
void backward_input(const Geom& g, const T* gout, const T* grid, T* gin, int64_t n0, int64_t n1) {
  const Axis<T> ax(g.W, g.pad, g.align), ay(g.H, g.pad, g.align);
  const int64_t P = g.Ho * g.Wo, L = g.H * g.W;
  std::fill(gin + n0 * g.C * L, gin + n1 * g.C * L, T(0));
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t p = 0; p < P; ++p) {
      const T gx = grid[(n * P + p) * 2], gy = grid[(n * P + p) * 2 + 1];
      for (int64_t c = 0; c < g.C; ++c) {
        T* plane = gin + (n * g.C + c) * L;
        const T go = gout[(n * g.C + c) * P + p];
        if (g.mode == kBilinear) {
          const Corners<T> k(ax.apply(gx), ay.apply(gy), g.H, g.W);
          for (int q = 0; q < 4; ++q) {
            if (k.off[q] >= 0) plane[k.off[q]] += k.wt[q] * go;
          }
        } else if (g.mode == kNearest) {
          const int64_t o = tap(to_index(std::nearbyint(ax.apply(gx))),
                                to_index(std::nearbyint(ay.apply(gy))), g.H, g.W);
          if (o >= 0) plane[o] += go;
        } else {
          const T x = ax.unnormalize(gx), y = ay.unnormalize(gy);
          const T fx = std::floor(x), fy = std::floor(y);
          T cx[4], cy[4];
          cubic_coeffs(x - fx, cx);
          cubic_coeffs(y - fy, cy);
          for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
              const int64_t o = cubic_tap(ax, ay, fx + T(-1 + i), fy + T(-1 + j));
              if (o >= 0) plane[o] += go * cx[i] * cy[j];
            }
          }
        }
      }
    }
  }
}

// d out / d (x, y) of one bilinear point summed over channels.
template <typename T>
void bilinear_grid_grad(const Geom& g, const Corners<T>& k, const T* inp, const T* gout, int64_t n,
                        int64_t p, T* gx, T* gy) {
  const int64_t P = g.Ho * g.Wo, L = g.H * g.W;
  for (int64_t c = 0; c < g.C; ++c) {
    const T* plane = inp + (n * g.C + c) * L;
    const T go = gout[(n * g.C + c) * P + p];
    const T nw = at(plane, k.off[0]), ne = at(plane, k.off[1]);
    const T sw = at(plane, k.off[2]), se = at(plane, k.off[3]);
    *gx = *gx + ((ne - nw) * k.s + (se - sw) * k.n) * go;
    *gy = *gy + ((sw - nw) * k.e + (se - ne) * k.w) * go;
  }
}

template <typename T>
void bicubic_grid_grad(const Geom& g, const Axis<T>& ax, const Axis<T>& ay, T x, T y, const T* inp,
                       const T* gout, int64_t n, int64_t p, T* gx, T* gy) {
  const int64_t P = g.Ho * g.Wo, L = g.H * g.W;
  const T fx = std::floor(x), fy = std::floor(y);
  T cx[4], cy[4], dx[4], dy[4];
  cubic_coeffs(x - fx, cx);
  cubic_coeffs(y - fy, cy);
  cubic_grads(x - fx, dx);
  cubic_grads(y - fy, dy);
  for (int64_t c = 0; c < g.C; ++c) {
    const T* plane = inp + (n * g.C + c) * L;
    const T go = gout[(n * g.C + c) * P + p];
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        const T v = at(plane, cubic_tap(ax, ay, fx + T(-1 + i), fy + T(-1 + j)));
        *gx = *gx - v * go * dx[i] * cy[j];
        *gy = *gy - v * go * dy[j] * cx[i];
      }
    }
  }
}

// The grid's gradient [N, Ho, Wo, 2] (zero for nearest).
template <typename T>
void backward_grid(const Geom& g, const T* gout, const T* inp, const T* grid, T* ggrid, int64_t n0,
                   int64_t n1) {
  const Axis<T> ax(g.W, g.pad, g.align), ay(g.H, g.pad, g.align);
  const int64_t P = g.Ho * g.Wo;
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t p = 0; p < P; ++p) {
      const T gx0 = grid[(n * P + p) * 2], gy0 = grid[(n * P + p) * 2 + 1];
      T gx = 0, gy = 0, mx = 0, my = 0;
      if (g.mode == kBilinear) {
        const T x = ax.apply_grad(gx0, &mx), y = ay.apply_grad(gy0, &my);
        bilinear_grid_grad(g, Corners<T>(x, y, g.H, g.W), inp, gout, n, p, &gx, &gy);
      } else if (g.mode == kBicubic) {
        mx = ax.scale;
        my = ay.scale;
        bicubic_grid_grad(g, ax, ay, ax.unnormalize(gx0), ay.unnormalize(gy0), inp, gout, n, p, &gx,
                          &gy);
      }
      ggrid[(n * P + p) * 2] = gx * mx;
      ggrid[(n * P + p) * 2 + 1] = gy * my;
    }
  }
}

template <typename T>
void run_typed(const backend::Instr& in, const std::vector<const Val*>& a, const Val& out,
               int64_t n0, int64_t n1) {
  auto p = [](const Val* v) { return reinterpret_cast<const T*>(v->data); };
  T* o = reinterpret_cast<T*>(out.data);
  if (in.op == ir::Op::GridSample) {
    return forward<T>(geom_of(in, *a[0], *a[1]), p(a[0]), p(a[1]), o, n0, n1);
  }
  const Geom g = geom_of(in, *a[1], *a[2]);
  if (in.attrs.i0 == 0) return backward_input<T>(g, p(a[0]), p(a[2]), o, n0, n1);
  backward_grid<T>(g, p(a[0]), p(a[1]), p(a[2]), o, n0, n1);
}

}  // namespace

void run_grid_sample_batches(const backend::Instr& in, const std::vector<const Val*>& args,
                             const Val& out, int64_t n0, int64_t n1) {
  if (out.dtype == kFloat32) return run_typed<float>(in, args, out, n0, n1);
  if (out.dtype == kFloat64) return run_typed<double>(in, args, out, n0, n1);
  ir::fail(ir::op_name(in.op), std::string("internal: no kernel for dtype ") +
                                   dtype_name(out.dtype) + "; float32 and float64 only.");
}

void run_grid_sample(const backend::Instr& in, const std::vector<const Val*>& args,
                     const Val& out) {
  run_grid_sample_batches(in, args, out, 0, out.shape.empty() ? 0 : out.shape[0]);
}

}  // namespace lazyx::reference
