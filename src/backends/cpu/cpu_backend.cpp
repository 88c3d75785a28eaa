// The cpu backend: compiles a planned program (plan.cpp) and runs its steps: fused LLVM loops on
// the thread pool, GEMM calls, and reference kernels for everything else.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/plan.h"
#include "backends/cpu/plan_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "backends/reference/kernels.h"
#include "dist/process_group.h"
#include "graph/profile.h"
#include "ir/shape_infer.h"
#include "lazyx/debug.h"
#include "lazyx/diagnostics.h"
#include "lazyx/error.h"
#include "runtime/env.h"
#include "runtime/scratch.h"

namespace lazyx::cpu {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;
using reference::Val;

namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements below which a fused loop runs inline

// A fused loop's name on the timeline: its ops and shape ("kernel add+mul+tanh [64, 784]").
std::string kernel_name(const LoweredGraph& g, const FusedSpec& spec) {
  std::string s = "kernel ";
  for (size_t i = 0; i < spec.members.size(); ++i) {
    if (i == 6) {
      s += "+...";
      break;
    }
    if (i) s += '+';
    s += ir::op_name(g.instrs[spec.members[i]].op);
  }
  return s + " " + ir::shape_str(spec.shape);
}

// parallel_for whose chunks are spans on the threads that run them while profiling.
template <class F>
void traced_for(const std::string* name, int64_t n, int64_t grain, int64_t min_parallel, F fn) {
  if (name == nullptr) {  // one captured pointer: the std::function does not allocate
    const F* f = &fn;
    return ThreadPool::get().parallel_for(n, grain, min_parallel,
                                          [f](int64_t b, int64_t e) { (*f)(b, e); });
  }
  ThreadPool::get().parallel_for(n, grain, min_parallel, [&](int64_t b, int64_t e) {
    const double t0 = profile::now_us();
    fn(b, e);
    profile::record(*name, "kernel", t0, profile::now_us(),
                    "\"range\": [" + std::to_string(b) + ", " + std::to_string(e) + "]");
  });
}

// Lists one program run fills, kept per thread; a nested run (none is expected) gets its own.
struct ExecScratch {
  std::vector<int64_t> scalar_store;
  std::vector<char*> ptr;
  std::vector<void*> bufs;
  std::vector<backend::ScalarValue> local_scalars;

  void clear() {}  // every list is assigned at the start of a run
};

class CpuBackend : public backend::Backend {
 public:
  // Validates LAZYX_NUM_THREADS at every backend creation (the pool reads it once), then
  // starts the pool: a bad value fails here and set_backend() leaves the old backend active.
  // LAZYX_CPU_MATH is read here too; programs compiled in the other math mode are dropped.
  CpuBackend() {
    default_num_threads();
    const bool adaptive = env::flag("LAZYX_ADAPTIVE_THREADS", true);
    const MathMode mode = math_mode_from_env();
    ThreadPool::get().set_adaptive(adaptive);
    if (set_math_mode(mode)) clear_program_cache();
  }
  std::string name() const override { return "cpu"; }
  void wait_background() override { wait_for_upgrades(); }
  int max_threads() const override { return ThreadPool::get().size(); }
  int num_threads() const override { return ThreadPool::get().width_cap(); }
  void set_num_threads(int n) override { ThreadPool::get().set_width_cap(n); }

  std::unique_ptr<backend::Program> compile(const LoweredGraph& g) override {
    auto p = [&] {
      ProfileSpan span("plan", "compile");
      return plan(widen_half_matmuls(g));
    }();
    p->kernels = compile_fused(p->g, p->specs, p->code);
    p->conv = make_conv_cache(p->g);
    return p;
  }

  void execute(backend::Program& prog, const backend::ExecArgs& args) override {
    auto& p = static_cast<CpuProgram&>(prog);
    if (const uint64_t g = env::generation(); g != env_seen_) {  // the environment changed
      ThreadPool::get().set_adaptive(env::flag("LAZYX_ADAPTIVE_THREADS", true));  // may raise
      env_seen_ = g;
    }
    if (p.code) take_upgrades(*p.code, p.kernels);  // full-tier kernels compiled meanwhile
    const LoweredGraph& g = p.g;
    auto& outputs = *args.outputs;
    const size_t n = g.instrs.size();
    runtime::BufferPtr arena;
    if (p.arena_bytes > 0) arena = allocate(static_cast<size_t>(p.arena_bytes));
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (p.fresh_output[o])
        outputs[o] = allocate(static_cast<size_t>(value_bytes(g.instrs[g.outputs[o]])));
    }
    // Every allocation happens before anything donated is written: a failure changes nothing.
    for (const Copy& c : p.dup_copies) {
      if (!outputs[c.out])
        outputs[c.out] = allocate(static_cast<size_t>(value_bytes(g.instrs[c.src_instr])));
    }
    runtime::ScratchLease<ExecScratch> lease;  // per-run lists, reused: a cached run allocates none
    std::vector<int64_t>& scalar_store = lease->scalar_store;
    std::vector<char*>& ptr = lease->ptr;
    scalar_store.assign(n, 0);
    ptr.assign(n, nullptr);
    auto resolve = [&](const Loc& l, size_t i) -> char* {
      switch (l.kind) {
        case LocKind::Param:
          return static_cast<char*>(args.params[l.v]->data()) +
                 (args.param_offsets.empty() ? 0 : args.param_offsets[l.v]);
        case LocKind::Scalar: {
          Val v{reinterpret_cast<char*>(&scalar_store[i]), g.instrs[i].dtype, {}};
          const auto& s = args.scalars[g.instrs[i].slot];
          if (is_floating(v.dtype)) reference::set_f(v, 0, s.f); else reference::set_i(v, 0, s.i);
          return v.data;
        }
        case LocKind::Arena: return static_cast<char*>(arena->data()) + l.v;
        case LocKind::Output: return static_cast<char*>(outputs[l.v]->data());
        default: return nullptr;
      }
    };
    for (size_t i = 0; i < n; ++i) ptr[i] = resolve(p.loc[i], i);

    std::vector<void*>& bufs = lease->bufs;
    std::vector<backend::ScalarValue>& local_scalars = lease->local_scalars;
    for (const Step& s : p.steps) {
      if (s.numel == 0 && s.pre_copies.empty()) continue;
      if (s.kind == StepKind::Check) {
        const Instr& in = g.instrs[s.instr];
        std::vector<Val> vals;
        for (int32_t c : in.inputs) vals.push_back({ptr[c], g.instrs[c].dtype, g.instrs[c].shape});
        std::vector<const Val*> ops;
        for (const Val& v : vals) ops.push_back(&v);
        reference::check_indices(in, ops);
        continue;
      }
      if (s.kind == StepKind::Fused) {
        bufs.assign(s.arg_instr.size(), nullptr);
        for (size_t a = 0; a < s.arg_instr.size(); ++a) bufs[a] = ptr[s.arg_instr[a]];
        for (const auto& [x, base] : s.pre_copies) {
          size_t bytes = static_cast<size_t>(value_bytes(g.instrs[x]));
          if (bytes && ptr[x] != ptr[base]) std::memcpy(ptr[x], ptr[base], bytes);
        }
        if (s.numel == 0) continue;
        KernelFn fn = p.kernels[s.spec];
        void* const* bp = bufs.data();
        // The kernel reads its own scalar inputs, in the order of the spec's inputs.
        local_scalars.clear();
        for (const auto& fi : p.specs[s.spec].inputs) {
          if (fi.arg < 0) local_scalars.push_back(args.scalars[g.instrs[fi.storage()].slot]);
        }
        const backend::ScalarValue* sc = local_scalars.data();
        ThreadPool& pool = ThreadPool::get();
        const std::string name = profile::on() ? kernel_name(g, p.specs[s.spec]) : std::string();
        const std::string* traced = name.empty() ? nullptr : &name;
        if (s.reduce < 0) {
          traced_for(traced, s.numel, 64, kParallelMin,
                     [&](int64_t b, int64_t e) { fn(bp, sc, b, e, 0, 0, nullptr); });
          continue;
        }
        const int64_t K = s.inner, T = pool.size();
        if (s.split && T > 1 && s.numel < 4 * T && K >= 64 * T && s.numel * K >= kParallelMin) {
          const double t0 = traced ? profile::now_us() : 0;
          run_split_reduction(p, s, fn, bp, sc, ptr);
          if (traced) profile::record(name + " (split)", "kernel", t0, profile::now_us());
          continue;
        }
        const int64_t work = std::max<int64_t>(K, 1);
        traced_for(traced, s.numel, 1, (kParallelMin + work - 1) / work,
                   [&](int64_t b, int64_t e) { fn(bp, sc, b, e, 0, K, nullptr); });
        continue;
      }
      const Instr& in = g.instrs[s.instr];
      std::vector<Val> vals;
      vals.reserve(in.inputs.size());
      for (int32_t c : in.inputs) vals.push_back({ptr[c], g.instrs[c].dtype, g.instrs[c].shape});
      std::vector<const Val*> ops;
      for (const Val& v : vals) ops.push_back(&v);
      Val out{ptr[s.instr], in.dtype, in.shape};
      if (s.kind == StepKind::Matmul) {
        float alpha = s.alpha;
        if (s.alpha_scalar >= 0) {
          const auto& sv = args.scalars[g.instrs[s.alpha_scalar].slot];
          alpha *= static_cast<float>(
              is_floating(g.instrs[s.alpha_scalar].dtype) ? sv.f : static_cast<double>(sv.i));
        }
        if (!s.gemm.empty()) {
          const size_t r = in.shape.size();
          gemm_matmul_views(Shape(in.shape.begin(), in.shape.end() - 2), in.shape[r - 2],
                            in.shape[r - 1], g.instrs[in.inputs[0]].shape.back(),
                            reinterpret_cast<const float*>(ptr[s.gemm[0].instr]), s.gemm[0],
                            reinterpret_cast<const float*>(ptr[s.gemm[1].instr]), s.gemm[1],
                            reinterpret_cast<float*>(ptr[s.instr]), alpha, s.beta);
          continue;
        }
        gemm_matmul(in, *ops[0], *ops[1], out, alpha, s.beta);
        continue;
      }
      if (p.conv && run_dnnl_conv(*p.conv, s.instr, ops, out)) continue;
      const double t0 = profile::on() ? profile::now_us() : -1;
      run_ref(in, ops, out);
      if (t0 >= 0) {
        profile::record(std::string("ref ") + ir::op_name(in.op), "kernel", t0, profile::now_us());
      }
    }
    // Final copies: parameters and scalars that are outputs (reading the old contents first),
    // then donated outputs computed into temporaries, then repeated outputs.
    for (const Copy& c : p.leaf_copies) {
      size_t bytes = static_cast<size_t>(value_bytes(g.instrs[c.src_instr]));
      char* dst = static_cast<char*>(outputs[c.out]->data());
      if (bytes && dst != ptr[c.src_instr]) std::memmove(dst, ptr[c.src_instr], bytes);
    }
    for (int32_t o : p.deferred) {
      int32_t x = g.outputs[o];
      size_t bytes = static_cast<size_t>(value_bytes(g.instrs[x]));
      if (bytes) std::memcpy(outputs[o]->data(), ptr[x], bytes);
      ptr[x] = static_cast<char*>(outputs[o]->data());
    }
    for (const Copy& c : p.dup_copies) {
      size_t bytes = static_cast<size_t>(value_bytes(g.instrs[c.src_instr]));
      char* dst = static_cast<char*>(outputs[c.out]->data());
      if (bytes && dst != ptr[c.src_instr]) std::memmove(dst, ptr[c.src_instr], bytes);
    }
  }

 private:
  // env::generation() when LAZYX_ADAPTIVE_THREADS was last read (runs hold the engine lock).
  uint64_t env_seen_ = 0;

  // A reduction with few outputs over a long dim: each thread reduces a slice of the reduced
  // dim into raw accumulators, then the caller combines them in order and stores the result.
  static void run_split_reduction(const CpuProgram& p, const Step& s, KernelFn fn, void* const* bp,
                                  const backend::ScalarValue* sc, const std::vector<char*>& ptr) {
    const LoweredGraph& g = p.g;
    const Instr& red = g.instrs[s.reduce];
    const Instr& src = g.instrs[red.inputs[0]];
    const bool fl = is_floating(src.dtype) || red.op == Op::Mean;
    ThreadPool& pool = ThreadPool::get();
    const int64_t T = pool.size(), kept = s.numel, K = s.inner;
    std::vector<int64_t> raw(static_cast<size_t>(T * kept));
    pool.parallel_for(T, 1, 0, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        fn(bp, sc, 0, kept, K * t / T, K * (t + 1) / T, raw.data() + t * kept);
      }
    });
    Val out{ptr[s.reduce], red.dtype, red.shape};
    for (int64_t o = 0; o < kept; ++o) {
      if (fl) {
        double acc = 0;
        for (int64_t t = 0; t < T; ++t) {
          double v;
          std::memcpy(&v, &raw[t * kept + o], sizeof v);
          if (t == 0) {
            acc = v;
          } else if (red.op == Op::Sum || red.op == Op::Mean) {
            acc += v;
          } else if (std::isnan(acc) || std::isnan(v)) {
            acc = NAN;
          } else {
            acc = red.op == Op::Amax ? std::max(acc, v) : std::min(acc, v);
          }
        }
        if (red.op == Op::Mean) acc /= static_cast<double>(K);
        reference::set_f(out, o, acc);
      } else {
        int64_t acc = raw[o];
        for (int64_t t = 1; t < T; ++t) {
          int64_t v = raw[t * kept + o];
          if (red.op == Op::Sum) {
            acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
          } else {
            acc = red.op == Op::Amax ? std::max(acc, v) : std::min(acc, v);
          }
        }
        reference::set_i(out, o, acc);
      }
    }
  }

  static void run_ref(const Instr& in, const std::vector<const Val*>& a, const Val& out) {
    switch (ir::op_info(in.op).family) {
      case ir::OpFamily::Elementwise: reference::run_elementwise(in, a, out); return;
      case ir::OpFamily::Reduce: reference::run_reduce(in, *a[0], out); return;
      case ir::OpFamily::Collective: dist::run_collective(in, a, out); return;
      default: break;
    }
    switch (in.op) {
      case Op::Softmax:
      case Op::LogSoftmax: reference::run_softmax(in, *a[0], out); return;
      case Op::AsStrided: reference::run_as_strided(in, *a[0], out); return;
      case Op::AsStridedScatter: reference::run_as_strided_scatter(in, *a[0], *a[1], out); return;
      case Op::Cat: reference::run_cat(in, a, out); return;
      // [math ops]

      // [sort/scan ops]
      case Op::Sort: reference::run_sort(in, *a[0], out); return;
      case Op::Scan: reference::run_scan(in, *a[0], out); return;
      case Op::ScatterReduce: reference::run_scatter_reduce(in, a, out); return;

      // [conv ops]
      case Op::Conv:
      case Op::ConvBackwardInput:
      case Op::ConvBackwardWeight: reference::run_conv(in, *a[0], *a[1], out); return;

      // [pool ops]
      case Op::TapSum:
      case Op::TapMax:
      case Op::TapScatter: {  // rows split across the pool
        const int64_t min_rows = std::max<int64_t>(1, 32768 / reference::taps_per_row(in, a));
        ThreadPool::get().parallel_for(out.shape[0], 1, min_rows, [&](int64_t b0, int64_t b1) {
          reference::run_taps_rows(in, a, out, b0, b1);
        });
        return;
      }

      // [sampling ops]
      case Op::GridSample:
      case Op::GridSampleBackward: {  // batches split across the pool
        const int64_t N = out.shape[0];
        const int64_t per = std::max<int64_t>(1, out.numel() / std::max<int64_t>(N, 1));
        ThreadPool::get().parallel_for(N, 1, std::max<int64_t>(1, 32768 / per),
                                       [&](int64_t n0, int64_t n1) {
                                         reference::run_grid_sample_batches(in, a, out, n0, n1);
                                       });
        return;
      }
      case Op::SegmentReduce:
      case Op::SegmentReduceBackward: reference::run_segment_reduce(in, a, out); return;
      case Op::Histogram: reference::run_histogram(in, a, out); return;

      default: reference::run_index(in, a, out); return;
    }
  }
};

}  // namespace

}  // namespace lazyx::cpu

namespace lazyx::backend {
std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }
}  // namespace lazyx::backend
