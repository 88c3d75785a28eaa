// lazyx._C._dist: lazyx::dist for Python, and the c10d::Backend behind the torch.distributed
// backend "lazyx". Collectives on device tensors record graph ops (they run in the next program);
// CPU tensors (torch's own bookkeeping, e.g. DDP's parameter shape check) go through Gloo at once.
#include <lazyx/dist.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "kernels.h"

namespace py = pybind11;
using namespace lazyx_bridge;
namespace ld = lazyx::dist;

namespace {

ld::ReduceOp to_reduce(const c10d::ReduceOp& op, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ld::ReduceOp::Sum;
    case c10d::ReduceOp::AVG:
      return ld::ReduceOp::Mean;
    case c10d::ReduceOp::MAX:
      return ld::ReduceOp::Max;
    case c10d::ReduceOp::MIN:
      return ld::ReduceOp::Min;
    default:
      break;
  }
  throw lazyx::Error(std::string("[") + what +
                     "] the lazyx backend reduces with SUM, AVG, MAX or MIN only; got another "
                     "ReduceOp (product, bitwise, premul_sum).");
}

// Work that is complete when returned: the collective is recorded in the graph (device tensors)
// or has already run (CPU tensors). Its future holds the output tensors, as DDP expects.
class LazyxWork : public c10d::Work {
 public:
  explicit LazyxWork(std::vector<at::Tensor> outputs) : outputs_(std::move(outputs)) {
    future_ =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future_->markCompleted(c10::IValue(outputs_));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> done(std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<LazyxWork>(std::move(outputs));
}

// `dst` (any layout) takes `src`'s values, outside autograd (like a backend writing memory).
void assign(at::Tensor& dst, const at::Tensor& src) {
  at::NoGradGuard no_grad;
  dst.copy_(src.view(dst.sizes()));
}

// A CPU tensor's collective runs on a contiguous copy when it is not contiguous.
template <typename F>
void on_host(at::Tensor& t, F&& run) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  run(c.data_ptr(), c.numel(), to_lz(c.scalar_type()));
  if (!c.is_same(t)) assign(t, c);
}

bool all_device(const std::vector<at::Tensor>& ts, const char* what) {
  bool dev = !ts.empty() && is_lazyx(ts[0]);
  for (const at::Tensor& t : ts) {
    if (is_lazyx(t) != dev || (!dev && !t.is_cpu())) {
      throw lazyx::Error(std::string("[") + what +
                         "] the lazyx backend takes tensors all on the lazyx device or all on "
                         "the CPU; move them to one device first.");
    }
  }
  return dev;
}

std::vector<at::Tensor> device_all_reduce(const std::vector<at::Tensor>& ts, ld::ReduceOp op,
                                          double scale) {
  std::vector<lazyx::Tensor> in;
  for (const at::Tensor& t : ts) in.push_back(lz(t));
  std::vector<lazyx::Tensor> out = ld::all_reduce(in, op, scale);
  std::vector<at::Tensor> r;
  for (auto& o : out) r.push_back(wrap(o));
  return r;
}

class LazyxBackend : public c10d::Backend {
 public:
  LazyxBackend(int rank, int size) : c10d::Backend(rank, size) {}
  const std::string getBackendName() const override { return "lazyx"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts,
                                           const c10d::AllreduceOptions& opts) override {
    return reduce_all(ts, opts.reduceOp);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& ts, const c10d::AllreduceCoalescedOptions& opts) override {
    return reduce_all(ts, opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts,
                                           const c10d::BroadcastOptions& opts) override {
    int root = static_cast<int>(opts.rootRank);
    if (all_device(ts, "broadcast")) {
      for (at::Tensor& t : ts) assign(t, wrap(ld::broadcast(lz(t), root)));
    } else {
      for (at::Tensor& t : ts) {
        on_host(t, [&](void* p, int64_t n, lazyx::Dtype d) { ld::broadcast_host(p, n, d, root); });
      }
    }
    return done(ts);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs,
                                           std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions&) override {
    check_one("allgather", ins.size(), outs.size());
    if (static_cast<int>(outs[0].size()) != getSize()) {
      throw lazyx::Error("[allgather] expected one output tensor per rank (" +
                         std::to_string(getSize()) + "), got " + std::to_string(outs[0].size()) +
                         ".");
    }
    at::Tensor all = gather(ins[0]);
    for (int r = 0; r < getSize(); ++r) assign(outs[0][r], all[r]);
    return done(outs[0]);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions&) override {
    assign(out, gather(in));
    return done({out});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs,
                                                std::vector<std::vector<at::Tensor>>& ins,
                                                const c10d::ReduceScatterOptions& opts) override {
    check_one("reduce_scatter", outs.size(), ins.size());
    std::vector<at::Tensor> blocks;
    for (const at::Tensor& b : ins[0]) blocks.push_back(b.reshape({-1}));
    at::Tensor flat = at::cat(blocks);
    scatter_into(outs[0], flat, opts.reduceOp);
    return done(outs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& opts) override {
    scatter_into(out, in.reshape({-1}), opts.reduceOp);
    return done({out});
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    ld::barrier();
    return done({});
  }

 private:
  static void check_one(const char* what, size_t a, size_t b) {
    if (a != 1 || b != 1) {
      throw lazyx::Error(std::string("[") + what +
                         "] the lazyx backend takes one tensor (one device) per call.");
    }
  }

  c10::intrusive_ptr<c10d::Work> reduce_all(std::vector<at::Tensor>& ts,
                                            const c10d::ReduceOp& rop) {
    ld::ReduceOp op = to_reduce(rop, "allreduce");
    if (all_device(ts, "allreduce")) {
      std::vector<at::Tensor> r = device_all_reduce(ts, op, 1.0);
      for (size_t i = 0; i < ts.size(); ++i) assign(ts[i], r[i]);
    } else {
      for (at::Tensor& t : ts) {
        on_host(t, [&](void* p, int64_t n, lazyx::Dtype d) { ld::all_reduce_host(p, n, d, op); });
      }
    }
    return done(ts);
  }

  // Every rank's `in`, stacked along a new dim 0.
  at::Tensor gather(const at::Tensor& in) {
    std::vector<int64_t> shape{getSize()};
    for (int64_t s : in.sizes()) shape.push_back(s);
    if (is_lazyx(in)) return wrap(ld::all_gather(lz(in.reshape({1, -1})))).view(shape);
    at::Tensor c = in.contiguous();
    at::Tensor out = at::empty(shape, c.options());
    ld::all_gather_host(c.data_ptr(), out.data_ptr(), c.numel(), to_lz(c.scalar_type()));
    return out;
  }

  // `flat` holds one block per rank; `out` gets the reduction of this rank's block.
  void scatter_into(at::Tensor& out, const at::Tensor& flat, const c10d::ReduceOp& rop) {
    ld::ReduceOp op = to_reduce(rop, "reduce_scatter");
    if (!is_lazyx(flat) || !is_lazyx(out)) {
      throw lazyx::Error(
          "[reduce_scatter] the lazyx backend reduce-scatters device tensors only; move them "
          "to lazyx.device() first.");
    }
    if (flat.numel() != out.numel() * getSize()) {
      throw lazyx::Error("[reduce_scatter] the input holds " + std::to_string(flat.numel()) +
                         " elements; expected world_size * output.numel() = " +
                         std::to_string(out.numel() * getSize()) + ".");
    }
    lazyx::Tensor r = ld::reduce_scatter(lz(flat.reshape({getSize(), -1})), op, 1.0);
    assign(out, wrap(r));
  }
};

ld::ReduceOp reduce_from_int(int op) {
  if (op < 0 || op > 3) {
    throw lazyx::Error("[dist] unknown reduction " + std::to_string(op) +
                       "; use 'sum', 'mean', 'max' or 'min'.");
  }
  return static_cast<ld::ReduceOp>(op);
}

}  // namespace

namespace lazyx_bridge {

void register_dist_bindings(py::module_& parent) {
  py::module_ m = parent.def_submodule("_dist", "lazyx::dist: collectives as graph ops");
  m.def("init",
        [](int rank, int world, const std::string& kind, const std::string& where, int port) {
          ld::Store s = kind == "file" ? ld::Store::file(where) : ld::Store::tcp(where, port);
          py::gil_scoped_release nogil;
          ld::init(rank, world, s);
        });
  m.def("destroy", []() { ld::destroy(); });
  m.def("is_initialized", []() { return ld::is_initialized(); });
  m.def("rank", []() { return ld::rank(); });
  m.def("world_size", []() { return ld::world_size(); });
  m.def("timeout_seconds", []() { return ld::timeout_seconds(); });
  m.def("all_reduce", [](const std::vector<at::Tensor>& ts, int op, double scale) {
    return device_all_reduce(ts, reduce_from_int(op), scale);
  });
  m.def("all_gather",
        [](const at::Tensor& t) { return wrap(ld::all_gather(lz_impl(t)->tensor())); });
  m.def("reduce_scatter", [](const at::Tensor& t, int op, double scale) {
    return wrap(ld::reduce_scatter(lz_impl(t)->tensor(), reduce_from_int(op), scale));
  });
  m.def("broadcast", [](const at::Tensor& t, int root) {
    return wrap(ld::broadcast(lz_impl(t)->tensor(), root));
  });
  // Gloo on a CPU tensor now, outside any graph (the benchmarks' baseline).
  m.def("host_all_reduce", [](at::Tensor& t, int op) {
    if (!t.is_cpu() || !t.is_contiguous()) {
      throw lazyx::Error("[all_reduce] host_all_reduce takes a contiguous CPU tensor.");
    }
    ld::ReduceOp r = reduce_from_int(op);
    void* p = t.data_ptr();
    int64_t n = t.numel();
    lazyx::Dtype d = to_lz(t.scalar_type());
    py::gil_scoped_release nogil;
    ld::all_reduce_host(p, n, d, r);
  });
  m.def("barrier", []() {
    py::gil_scoped_release nogil;
    ld::barrier();
  });
  // The c10d::Backend of torch.distributed's "lazyx" backend (the lazyx group must be up).
  m.def("create_backend", [](int rank, int size) -> c10::intrusive_ptr<c10d::Backend> {
    if (!ld::is_initialized() || ld::rank() != rank || ld::world_size() != size) {
      throw lazyx::Error("[dist] the lazyx group must be initialized as rank " +
                         std::to_string(rank) + " of " + std::to_string(size) +
                         " before its torch.distributed process group is made.");
    }
    return c10::make_intrusive<LazyxBackend>(rank, size);
  });
}

}  // namespace lazyx_bridge

// DDP and torch.distributed call the c10d ops through the dispatcher; they have no autograd
// kernel, so device tensors go straight to their backend kernel.
TORCH_LIBRARY_IMPL(c10d, AutogradLazy, m) {
  for (const char* op : {"c10d::broadcast_", "c10d::allreduce_", "c10d::allgather_",
                         "c10d::reduce_scatter_", "c10d::barrier"}) {
    impl(m, op, torch::CppFunction::makeFallthrough());
  }
}

namespace {
// torch's c10d kernels exist for CPU and other device keys, not for Lazy; the CPU one only picks
// the group's backend for the device and calls it, and "lazyx" is that backend for both.
void c10d_on_cpu_kernel(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), s);
}
}  // namespace

namespace lazyx_bridge {
// Every c10d op with a CPU kernel and none for Lazy gets c10d_on_cpu_kernel (at module load).
void register_c10d_kernels() {
  register_boxed_for_lazy<&c10d_on_cpu_kernel>("c10d", [](const c10::OperatorHandle& op) {
    return op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
  });
}
}  // namespace lazyx_bridge
