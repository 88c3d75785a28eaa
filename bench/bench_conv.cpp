// conv2d forward, backward data and backward weights: lazyx's cpu backend (a cached program
// around oneDNN primitives, the batch split over its pool) against one oneDNN primitive over
// the whole batch called directly, with OpenMP at the same thread count (LAZYX_NUM_THREADS).
//   LAZYX_NUM_THREADS=2 build/bench/bench_conv [iters]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <functional>
#include <vector>

#include "bench_util.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using Clock = std::chrono::steady_clock;
using dnnl::memory;

namespace {

double time_ms(int iters, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return bench::median(t);
}

struct Shape4 {
  int64_t n, c, h, w, oc;
};

// The direct oneDNN baseline: plain user buffers, the primitive's own layouts, reorders.
struct Direct {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  memory::desc src, wei, dst;
  std::vector<float> x, w, y;
  explicit Direct(const Shape4& c)
      : src({c.n, c.c, c.h, c.w}, memory::data_type::f32, memory::format_tag::nchw),
        wei({c.oc, c.c, 3, 3}, memory::data_type::f32, memory::format_tag::oihw),
        dst({c.n, c.oc, c.h, c.w}, memory::data_type::f32, memory::format_tag::nchw),
        x(c.n * c.c * c.h * c.w, 0.5f), w(c.oc * c.c * 9, 0.25f), y(c.n * c.oc * c.h * c.w) {}
  memory::desc any(const memory::desc& m) {
    return memory::desc(m.dims(), memory::data_type::f32, memory::format_tag::any);
  }
  // Runs prim with user buffers reordered into its layouts (outputs reordered back).
  void run(const dnnl::primitive& prim, std::vector<std::tuple<int, memory::desc, memory::desc,
                                                               float*, bool>> args) {
    std::unordered_map<int, memory> m;
    std::vector<std::pair<memory, memory>> back;
    for (auto& [arg, user_md, inner_md, ptr, out] : args) {
      memory u(user_md, eng, ptr);
      if (user_md == inner_md) {
        m.emplace(arg, u);
        continue;
      }
      memory in(inner_md, eng);
      if (!out) dnnl::reorder(u, in).execute(s, u, in);
      else back.emplace_back(in, u);
      m.emplace(arg, in);
    }
    prim.execute(s, m);
    for (auto& [in, u] : back) dnnl::reorder(in, u).execute(s, in, u);
    s.wait();
  }
};

void bench_shape(const Shape4& c, int iters) {
  Direct d(c);
  const memory::dims st{1, 1}, pad{1, 1};
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                     dnnl::algorithm::convolution_direct, d.any(d.src),
                                     d.any(d.wei), d.any(d.dst), st, pad, pad);
  dnnl::convolution_forward::primitive_desc fpd(fd, d.eng);
  dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, d.any(d.src),
                                           d.any(d.wei), d.any(d.dst), st, pad, pad);
  dnnl::convolution_backward_data::primitive_desc bpd(bd, d.eng, fpd);
  dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, d.any(d.src),
                                              d.any(d.wei), d.any(d.dst), st, pad, pad);
  dnnl::convolution_backward_weights::primitive_desc wpd(wd, d.eng, fpd);
  dnnl::convolution_forward fwd(fpd);
  dnnl::convolution_backward_data bwd(bpd);
  dnnl::convolution_backward_weights bww(wpd);
  const double df = time_ms(iters, [&] {
    d.run(fwd, {{DNNL_ARG_SRC, d.src, fpd.src_desc(), d.x.data(), false},
                {DNNL_ARG_WEIGHTS, d.wei, fpd.weights_desc(), d.w.data(), false},
                {DNNL_ARG_DST, d.dst, fpd.dst_desc(), d.y.data(), true}});
  });
  const double dd = time_ms(iters, [&] {
    d.run(bwd, {{DNNL_ARG_DIFF_SRC, d.src, bpd.diff_src_desc(), d.x.data(), true},
                {DNNL_ARG_WEIGHTS, d.wei, bpd.weights_desc(), d.w.data(), false},
                {DNNL_ARG_DIFF_DST, d.dst, bpd.diff_dst_desc(), d.y.data(), false}});
  });
  const double dw = time_ms(iters, [&] {
    d.run(bww, {{DNNL_ARG_SRC, d.src, wpd.src_desc(), d.x.data(), false},
                {DNNL_ARG_DIFF_WEIGHTS, d.wei, wpd.diff_weights_desc(), d.w.data(), true},
                {DNNL_ARG_DIFF_DST, d.dst, wpd.diff_dst_desc(), d.y.data(), false}});
  });
  Tensor x = full({c.n, c.c, c.h, c.w}, 0.5), w = full({c.oc, c.c, 3, 3}, 0.25);
  Tensor g = full({c.n, c.oc, c.h, c.w}, 0.125);
  mark_step();
  ConvOptions o;
  o.padding = {1};
  const double lf = time_ms(iters, [&] { sync({conv2d(x, w, {}, o)}); });
  const double ld = time_ms(iters, [&] { sync({convolution_backward_input(g, w, x.shape(), o)}); });
  const double lw = time_ms(iters, [&] { sync({convolution_backward_weight(g, x, w.shape(), o)}); });
  std::printf("| %d | [%ld, %ld, %ld, %ld] -> %ld | %.2f / %.2f (%.2f) | %.2f / %.2f (%.2f) | "
              "%.2f / %.2f (%.2f) |\n",
              bench::num_threads(), c.n, c.c, c.h, c.w, c.oc, lf, df, lf / df, ld, dd, ld / dd,
              lw, dw, lw / dw);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
  omp_set_num_threads(bench::num_threads());
  set_backend("cpu");
  std::printf("| threads | input -> C_out (3x3, pad 1) | forward lazyx / dnnl ms (ratio) | "
              "backward data | backward weights |\n|---|---|---|---|---|\n");
  for (const Shape4& c : {Shape4{32, 3, 32, 32, 32}, Shape4{32, 32, 16, 16, 64},
                          Shape4{8, 64, 56, 56, 64}}) {
    bench_shape(c, iters);
  }
}
