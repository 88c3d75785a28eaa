// Each convolution maps onto a plain problem (backends/conv_geom.h) with plain (N, C, *spatial)
// layouts, so oneDNN reads and writes the program's buffers directly. oneDNN's OpenMP runtime
// busy-waits and would fight the pool, so every call runs on one thread (as gemm.cpp does) and
// large problems are cut into batch pieces run on the pool; backward weights sums the pieces'
// partial gradients.
#include "backends/cpu/dnnl_conv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <unordered_map>

#include "backends/conv_geom.h"
#include "backends/cpu/thread_pool.h"
#include "graph/profile.h"

namespace lazyx::cpu {

namespace {

constexpr double kParallelFlops = 4e6;  // below this a convolution runs on the calling thread

// omp_get_max_threads() is per thread: 1 on the calling thread for a call, restored after.
class OmpOneThread {
 public:
  OmpOneThread() : prev_(omp_get_max_threads()) {
    if (prev_ != 1) omp_set_num_threads(1);
  }
  ~OmpOneThread() {
    if (prev_ != 1) omp_set_num_threads(prev_);
  }
  OmpOneThread(const OmpOneThread&) = delete;
  OmpOneThread& operator=(const OmpOneThread&) = delete;

 private:
  int prev_;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

using dnnl::memory;

memory::desc plain_md(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::dims cat_dims(std::initializer_list<int64_t> head, const std::vector<int64_t>& tail) {
  memory::dims d(head);
  d.insert(d.end(), tail.begin(), tail.end());
  return d;
}

// A tensor of a primitive: its plain layout (the program's buffer) and the layout the primitive
// chose; when they differ, a reorder into (input) or out of (output) a temporary.
struct Arg {
  int arg = 0;  // DNNL_ARG_*
  bool output = false;
  memory::desc plain, inner;
  dnnl::primitive reorder;
  memory::desc reorder_scratch;
  bool reordered() const { return plain != inner; }
};

// One primitive for a batch of `n`: its arguments in Role order (src, weights, dst).
struct Prim {
  dnnl::primitive prim;
  std::array<Arg, 3> args;
  memory::desc scratch;
};

int64_t prod(const std::vector<int64_t>& v) {
  int64_t r = 1;
  for (int64_t x : v) r *= x;
  return r;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void set_arg(Arg& a, int arg, bool output, const memory::desc& plain, const memory::desc& inner) {
  a.arg = arg;
  a.output = output;
  a.plain = plain;
  a.inner = inner;
  if (!a.reordered()) return;
  const memory::desc& from = output ? inner : plain;
  const memory::desc& to = output ? plain : inner;
  dnnl::reorder::primitive_desc rpd(engine(), from, engine(), to, user_scratchpad());
  a.reorder_scratch = rpd.scratchpad_desc();
  a.reorder = dnnl::reorder(rpd);
}

Prim make_prim(const conv::Problem& p, int64_t n) {
  // oneDNN fixes a primitive's threading when it is created: for the single-threaded calls it
  // will make (torch.set_num_threads(2) on this thread made backward weights 8x slower).
  OmpOneThread one;
  const memory::desc src = plain_md(cat_dims({n, p.ic}, p.in));
  const memory::desc dst = plain_md(cat_dims({n, p.oc}, p.out));
  const memory::desc wei =
      p.groups > 1 ? plain_md(cat_dims({p.groups, p.oc / p.groups, p.ic / p.groups}, p.ker))
                   : plain_md(cat_dims({p.oc, p.ic}, p.ker));
  auto any = [](const memory::desc& m) {
    return memory::desc(m.dims(), memory::data_type::f32, memory::format_tag::any);
  };
  memory::dims strides(p.stride), dil(p.k), pl(p.pad), pr(p.k);
  for (int d = 0; d < p.k; ++d) {
    dil[d] = p.dil[d] - 1;
    // The right padding that makes oneDNN's size relation exact (may be negative).
    pr[d] = (p.out[d] - 1) * p.stride[d] + (p.ker[d] - 1) * p.dil[d] + 1 - p.in[d] - p.pad[d];
  }
  const dnnl::primitive_attr attr = user_scratchpad();
  const auto alg = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, alg, any(src), any(wei),
                                     any(dst), strides, dil, pl, pr);
  dnnl::convolution_forward::primitive_desc fpd(fd, attr, engine());
  Prim r;
  if (p.dir == conv::Dir::Fwd) {
    r.scratch = fpd.scratchpad_desc();
    r.prim = dnnl::convolution_forward(fpd);
    set_arg(r.args[0], DNNL_ARG_SRC, false, src, fpd.src_desc());
    set_arg(r.args[1], DNNL_ARG_WEIGHTS, false, wei, fpd.weights_desc());
    set_arg(r.args[2], DNNL_ARG_DST, true, dst, fpd.dst_desc());
  } else if (p.dir == conv::Dir::BwdData) {
    dnnl::convolution_backward_data::desc bd(alg, any(src), any(wei), any(dst), strides, dil, pl,
                                             pr);
    dnnl::convolution_backward_data::primitive_desc bpd(bd, attr, engine(), fpd);
    r.scratch = bpd.scratchpad_desc();
    r.prim = dnnl::convolution_backward_data(bpd);
    set_arg(r.args[0], DNNL_ARG_DIFF_SRC, true, src, bpd.diff_src_desc());
    set_arg(r.args[1], DNNL_ARG_WEIGHTS, false, wei, bpd.weights_desc());
    set_arg(r.args[2], DNNL_ARG_DIFF_DST, false, dst, bpd.diff_dst_desc());
  } else {
    dnnl::convolution_backward_weights::desc wd(alg, any(src), any(wei), any(dst), strides, dil, pl,
                                                pr);
    dnnl::convolution_backward_weights::primitive_desc wpd(wd, attr, engine(), fpd);
    r.scratch = wpd.scratchpad_desc();
    r.prim = dnnl::convolution_backward_weights(wpd);
    set_arg(r.args[0], DNNL_ARG_SRC, false, src, wpd.src_desc());
    set_arg(r.args[1], DNNL_ARG_DIFF_WEIGHTS, true, wei, wpd.diff_weights_desc());
    set_arg(r.args[2], DNNL_ARG_DIFF_DST, false, dst, wpd.diff_dst_desc());
  }
  return r;
}

// One Conv* instruction: its problem, the batch pieces and a primitive per piece size.
struct ConvEntry {
  ir::Op op;
  conv::Problem p;
  int64_t pieces = 1;
  std::map<int64_t, Prim> by_batch;
};

// Batch range [begin, end) of piece t.
std::pair<int64_t, int64_t> piece_range(int64_t n, int64_t pieces, int64_t t) {
  return {n * t / pieces, n * (t + 1) / pieces};
}

}  // namespace

struct ConvCache {
  std::unordered_map<int32_t, ConvEntry> entries;
};

std::shared_ptr<ConvCache> make_conv_cache(const backend::LoweredGraph& g, int threads) {
  std::shared_ptr<ConvCache> cache;
  const int64_t T = threads > 0 ? threads : ThreadPool::get().size();
  for (size_t i = 0; i < g.instrs.size(); ++i) {
    const backend::Instr& in = g.instrs[i];
    if (in.op != ir::Op::Conv && in.op != ir::Op::ConvBackwardInput &&
        in.op != ir::Op::ConvBackwardWeight) {
      continue;
    }
    // 16-bit floats compute in float32 and round once; float64 and integers stay exact.
    if (in.dtype != kFloat32 && in.dtype != kBFloat16 && in.dtype != kFloat16) continue;
    ConvEntry e;
    e.op = in.op;
    e.p = conv::make_problem(in, g.instrs[in.inputs[0]].shape, g.instrs[in.inputs[1]].shape);
    const conv::Problem& p = e.p;
    const int64_t work = prod(p.out) * prod(p.ker) * p.n * p.oc * (p.ic / p.groups);
    if (work == 0 || p.ic == 0) continue;  // empty: the reference kernel writes the zeros
    if (2.0 * static_cast<double>(work) >= kParallelFlops && T > 1) e.pieces = std::min(p.n, T);
    try {
      for (int64_t t = 0; t < e.pieces; ++t) {
        const auto [b, end] = piece_range(p.n, e.pieces, t);
        if (!e.by_batch.count(end - b)) e.by_batch.emplace(end - b, make_prim(p, end - b));
      }
    } catch (const dnnl::error&) {
      continue;  // a geometry oneDNN refuses: the reference kernel runs it
    }
    if (!cache) cache = std::make_shared<ConvCache>();
    cache->entries.emplace(static_cast<int32_t>(i), std::move(e));
  }
  return cache;
}

namespace {

// Uninitialized scratch memory (a std::vector would zero it first).
class Bytes {
 public:
  Bytes() = default;
  explicit Bytes(size_t n) : p_(n ? new char[n] : nullptr) {}
  char* data() { return p_.get(); }

 private:
  std::unique_ptr<char[]> p_;
};

// Runs the reorder of `a` between `user` and `inner`, in the direction of the data.
void reorder(const Arg& a, dnnl::stream& stream, memory& user, memory& inner) {
  Bytes scratch(a.reorder_scratch.get_size());
  memory sp(a.reorder_scratch, engine(), scratch.data());
  a.reorder.execute(stream, {{DNNL_ARG_FROM, a.output ? inner : user},
                             {DNNL_ARG_TO, a.output ? user : inner},
                             {DNNL_ARG_SCRATCHPAD, sp}});
}

// Runs `r` on one batch piece whose plain tensors (src, weights, dst) start at ptrs.
void run_piece(const Prim& r, const std::array<float*, 3>& ptrs) {
  OmpOneThread one;
  static thread_local dnnl::stream stream(engine());
  Bytes scratch(r.scratch.get_size());
  std::array<Bytes, 3> temps;
  std::array<memory, 3> user, inner;
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SCRATCHPAD, memory(r.scratch, engine(), scratch.data())}};
  for (size_t i = 0; i < 3; ++i) {
    const Arg& a = r.args[i];
    user[i] = memory(a.plain, engine(), ptrs[i]);
    if (a.reordered()) {
      temps[i] = Bytes(a.inner.get_size());
      inner[i] = memory(a.inner, engine(), temps[i].data());
      if (!a.output) reorder(a, stream, user[i], inner[i]);
    }
    args.emplace(a.arg, a.reordered() ? inner[i] : user[i]);
  }
  r.prim.execute(stream, args);
  for (size_t i = 0; i < 3; ++i) {
    if (r.args[i].output && r.args[i].reordered()) reorder(r.args[i], stream, user[i], inner[i]);
  }
  stream.wait();
}

}  // namespace

bool run_dnnl_conv(const ConvCache& cache, int32_t instr,
                   const std::vector<const reference::Val*>& a, const reference::Val& out) {
  auto it = cache.entries.find(instr);
  if (it == cache.entries.end()) return false;
  const ConvEntry& e = it->second;
  const conv::Problem& p = e.p;
  const std::array<const reference::Val*, 3> vals{a[0], a[1], &out};
  // 16-bit operands widen into float32 copies; the output narrows back at the end.
  std::array<std::vector<float>, 3> wide;
  std::array<float*, 3> ptr{};
  for (size_t r = 0; r < 3; ++r) {
    const reference::Val& v = *vals[r];
    if (v.dtype == kFloat32) {
      ptr[r] = reinterpret_cast<float*>(v.data);
      continue;
    }
    wide[r].resize(static_cast<size_t>(v.numel()));
    for (int64_t i = 0; r < 2 && i < v.numel(); ++i) {
      wide[r][i] = static_cast<float>(reference::get_f(v, i));
    }
    ptr[r] = wide[r].data();
  }
  float* src = ptr[p.src];
  float* wei = ptr[p.wei];
  float* dst = ptr[p.dst];
  const int64_t src_item = p.ic * prod(p.in), dst_item = p.oc * prod(p.out);
  const int64_t wsize = p.oc * (p.ic / p.groups) * prod(p.ker);
  const bool partial = p.dir == conv::Dir::BwdWeight && e.pieces > 1;
  std::vector<float> parts(partial ? static_cast<size_t>((e.pieces - 1) * wsize) : 0);
  auto piece = [&](int64_t t) {
    const auto [b, end] = piece_range(p.n, e.pieces, t);
    float* w = partial && t > 0 ? parts.data() + (t - 1) * wsize : wei;
    run_piece(e.by_batch.at(end - b), {src + b * src_item, w, dst + b * dst_item});
  };
  const double t0 = profile::on() ? profile::now_us() : -1;
  if (e.pieces == 1) {
    piece(0);
  } else {
    ThreadPool::get().parallel_for(e.pieces, 1, 0, [&](int64_t b, int64_t end) {
      for (int64_t t = b; t < end; ++t) piece(t);
    });
  }
  for (int64_t t = 1; partial && t < e.pieces; ++t) {
    const float* q = parts.data() + (t - 1) * wsize;
    for (int64_t i = 0; i < wsize; ++i) wei[i] += q[i];
  }
  for (int64_t i = 0; out.dtype != kFloat32 && i < out.numel(); ++i) {
    reference::set_f(out, i, wide[2][i]);
  }
  if (t0 >= 0) {
    profile::record(std::string("dnnl ") + ir::op_name(e.op), "kernel", t0, profile::now_us());
  }
  return true;
}

}  // namespace lazyx::cpu
