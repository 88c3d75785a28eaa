// Convolutions, forward and both gradients, as plain loops over every (source, weight,
// destination) triple with double accumulation: the oracle for the cpu backend's oneDNN path.
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/conv_geom.h"
#include "backends/reference/kernels.h"

namespace lazyx::reference {

namespace {

// The problem padded to three spatial dims (leading dims of size 1).
struct Geom3 {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, ker{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0},
      dil{1, 1, 1};
};

Geom3 geom3(const conv::Problem& p) {
  Geom3 g;
  const int off = 3 - p.k;
  for (int d = 0; d < p.k; ++d) {
    g.in[off + d] = p.in[d];
    g.out[off + d] = p.out[d];
    g.ker[off + d] = p.ker[d];
    g.stride[off + d] = p.stride[d];
    g.pad[off + d] = p.pad[d];
    g.dil[off + d] = p.dil[d];
  }
  return g;
}

// Floating values accumulate in double; integers in uint64 (wrapping, as eager's int64 does).
template <class T>
std::vector<T> load(const Val& v) {
  std::vector<T> r(static_cast<size_t>(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) {
    if constexpr (std::is_same_v<T, double>)
      r[i] = get_f(v, i);
    else
      r[i] = static_cast<uint64_t>(get_i(v, i));
  }
  return r;
}

// Calls f(src_index, weight_index, dst_index) for every product term of the convolution.
template <class F>
void for_each_term(const conv::Problem& p, F f) {
  const Geom3 g = geom3(p);
  const int64_t G = p.groups, icg = p.ic / G, ocg = p.oc / G;
  const int64_t in_sp = g.in[0] * g.in[1] * g.in[2], out_sp = g.out[0] * g.out[1] * g.out[2];
  const int64_t ker_sp = g.ker[0] * g.ker[1] * g.ker[2];
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oc = 0; oc < p.oc; ++oc) {
      const int64_t grp = oc / ocg;
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
            const int64_t di = (n * p.oc + oc) * out_sp + (o0 * g.out[1] + o1) * g.out[2] + o2;
            for (int64_t c = 0; c < icg; ++c) {
              const int64_t ic = grp * icg + c;
              for (int64_t k0 = 0; k0 < g.ker[0]; ++k0) {
                const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
                if (i0 < 0 || i0 >= g.in[0]) continue;
                for (int64_t k1 = 0; k1 < g.ker[1]; ++k1) {
                  const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
                  if (i1 < 0 || i1 >= g.in[1]) continue;
                  for (int64_t k2 = 0; k2 < g.ker[2]; ++k2) {
                    const int64_t i2 = o2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
                    if (i2 < 0 || i2 >= g.in[2]) continue;
                    const int64_t si = (n * p.ic + ic) * in_sp + (i0 * g.in[1] + i1) * g.in[2] + i2;
                    const int64_t wi =
                        (oc * icg + c) * ker_sp + (k0 * g.ker[1] + k1) * g.ker[2] + k2;
                    f(si, wi, di);
                  }
                }
              }
            }
          }
    }
}

}  // namespace

namespace {

template <class T>
void conv_in(const conv::Problem& p, const std::array<const Val*, 3>& vals, const Val& out) {
  std::vector<T> acc(static_cast<size_t>(out.numel()), T(0));
  if (p.dir == conv::Dir::Fwd) {
    const std::vector<T> s = load<T>(*vals[p.src]), w = load<T>(*vals[p.wei]);
    for_each_term(p, [&](int64_t si, int64_t wi, int64_t di) { acc[di] += s[si] * w[wi]; });
  } else if (p.dir == conv::Dir::BwdData) {
    const std::vector<T> d = load<T>(*vals[p.dst]), w = load<T>(*vals[p.wei]);
    for_each_term(p, [&](int64_t si, int64_t wi, int64_t di) { acc[si] += d[di] * w[wi]; });
  } else {
    const std::vector<T> s = load<T>(*vals[p.src]), d = load<T>(*vals[p.dst]);
    for_each_term(p, [&](int64_t si, int64_t wi, int64_t di) { acc[wi] += d[di] * s[si]; });
  }
  for (int64_t i = 0; i < out.numel(); ++i) {
    if constexpr (std::is_same_v<T, double>)
      set_f(out, i, acc[i]);
    else
      set_i(out, i, static_cast<int64_t>(acc[i]));
  }
}

}  // namespace

void run_conv(const backend::Instr& in, const Val& a, const Val& b, const Val& out) {
  const conv::Problem p = conv::make_problem(in, a.shape, b.shape);
  const std::array<const Val*, 3> vals{&a, &b, &out};
  if (float_domain(out.dtype))
    conv_in<double>(p, vals, out);
  else
    conv_in<uint64_t>(p, vals, out);
}

}  // namespace lazyx::reference
