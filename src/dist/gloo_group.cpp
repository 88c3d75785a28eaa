// The process group on Gloo: a full mesh of TCP pairs set up through a file or TCP store, and
// Gloo's allreduce / allgather / broadcast / barrier with lazyx's reduction functions.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dist/control_channel.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"
#include "lazyx/error.h"

namespace lazyx::dist {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T, int K>
void reduce_native(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (K == 0) {
      c[i] = a[i] + b[i];
    } else if constexpr (K == 1) {
      c[i] = a[i] < b[i] ? b[i] : a[i];
    } else {
      c[i] = b[i] < a[i] ? b[i] : a[i];
    }
  }
}

// 16-bit floats: each pairwise step in float, rounded back (as PyTorch's Gloo backend does).
template <bool BF, int K>
void reduce_half(void* c_, const void* a_, const void* b_, size_t n) {
  auto* c = static_cast<uint16_t*>(c_);
  auto* a = static_cast<const uint16_t*>(a_);
  auto* b = static_cast<const uint16_t*>(b_);
  for (size_t i = 0; i < n; ++i) {
    float x = BF ? bf16_to_float(a[i]) : half_to_float(a[i]);
    float y = BF ? bf16_to_float(b[i]) : half_to_float(b[i]);
    float r = K == 0 ? x + y : K == 1 ? (x < y ? y : x) : (y < x ? y : x);
    c[i] = BF ? float_to_bf16(r) : float_to_half(r);
  }
}

template <int K>
ReduceFn pick(Dtype d) {
  switch (d) {
    case kFloat32:
      return &reduce_native<float, K>;
    case kFloat64:
      return &reduce_native<double, K>;
    case kInt32:
      return &reduce_native<int32_t, K>;
    case kUInt8:
      return &reduce_native<uint8_t, K>;
    case kInt8:
      return &reduce_native<int8_t, K>;
    case kInt16:
      return &reduce_native<int16_t, K>;
    case kInt64:
      return &reduce_native<int64_t, K>;
    case kFloat16:
      return &reduce_half<false, K>;
    case kBFloat16:
      return &reduce_half<true, K>;
    default:
      return nullptr;
  }
}

ReduceFn reduce_fn(Dtype d, ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return pick<1>(d);
    case ReduceOp::Min:
      return pick<2>(d);
    default:
      return pick<0>(d);
  }
}

class GlooGroup : public ProcessGroup {
 public:
  GlooGroup(int rank, int size, const Store& store, double timeout_s) {
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    gloo::transport::tcp::attr attr;
    const char* iface = std::getenv("LAZYX_DIST_IFACE");
    std::unique_ptr<gloo::rendezvous::Store> base;
    if (store.kind == Store::Kind::File) {
      std::error_code ec;
      std::filesystem::create_directories(store.path, ec);
      base = std::make_unique<gloo::rendezvous::FileStore>(store.path);
      attr.hostname = "127.0.0.1";
    } else {
      base = std::make_unique<TcpStore>(store.host, store.port, rank == 0, timeout);
      attr.hostname = local_address_towards(store.host, store.port);
    }
    if (iface && *iface) {
      attr.hostname.clear();
      attr.iface = iface;
    }
    store_ = std::move(base);
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
      ctx->setTimeout(timeout);
      gloo::rendezvous::PrefixStore prefixed("lazyx", *store_);
      ctx->connectFullMesh(prefixed, device_);
      ctx_ = std::move(ctx);
      gloo::rendezvous::PrefixStore ctl_store("lazyx-ctl", *store_);
      ctl_ = std::make_unique<ControlChannel>(rank, size, ctl_store, attr.hostname, attr.iface,
                                              timeout_s);
      barrier();  // every rank is done with the store
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(std::string("[dist.init] rank ") + std::to_string(rank) + " of " +
                  std::to_string(size) + " could not connect to the others: " + e.what() +
                  " Check that every rank runs with the same store and world_size, and that the "
                  "ranks can reach each other (LAZYX_DIST_IFACE picks the network interface).");
    }
  }

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }

  void all_reduce(void* data, int64_t count, Dtype dtype, ReduceOp op) override {
    ReduceFn fn = reduce_fn(dtype, op);
    if (!fn) unsupported("all_reduce", dtype);
    if (count == 0 || size() == 1) return;
    run("all_reduce", [&] {
      gloo::AllreduceOptions o(ctx_);
      // Gloo only needs the element size; the reduction function knows the type.
      switch (dtype_size(dtype)) {
        case 2:
          set_output<uint16_t>(o, data, count);
          break;
        case 4:
          set_output<uint32_t>(o, data, count);
          break;
        default:
          set_output<uint64_t>(o, data, count);
          break;
      }
      o.setReduceFunction(fn);
      o.setTag(next_tag());
      gloo::allreduce(o);
    });
  }

  void all_gather(const void* in, void* out, int64_t count, Dtype dtype) override {
    size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    if (size() == 1 || bytes == 0) {
      if (bytes && in != out) std::memmove(out, in, bytes);
      return;
    }
    run("all_gather", [&] {
      gloo::AllgatherOptions o(ctx_);
      o.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
      o.setOutput(static_cast<char*>(out), bytes * static_cast<size_t>(size()));
      o.setTag(next_tag());
      gloo::allgather(o);
    });
  }

  void broadcast(void* data, int64_t count, Dtype dtype, int root) override {
    size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    if (size() == 1 || bytes == 0) return;
    run("broadcast", [&] {
      gloo::BroadcastOptions o(ctx_);
      o.setOutput(static_cast<char*>(data), bytes);
      o.setRoot(root);
      o.setTag(next_tag());
      gloo::broadcast(o);
    });
  }

  void exchange(const void* mine, void* all, size_t bytes) override {
    run("agree", [&] { ctl_->all_gather(mine, bytes, all); });
  }

  void barrier() override {
    if (size() == 1) return;
    run("barrier", [&] {
      gloo::BarrierOptions o(ctx_);
      o.setTag(next_tag());
      gloo::barrier(o);
    });
  }

 private:
  template <typename T>
  static void set_output(gloo::AllreduceOptions& o, void* data, int64_t count) {
    T* p = static_cast<T*>(data);
    o.setOutputs(&p, 1, static_cast<size_t>(count));
  }

  [[noreturn]] static void unsupported(const char* op, Dtype d) {
    throw Error(std::string("[") + op + "] dtype " + dtype_name(d) +
                " is not supported by collectives; use a floating or int32/int64 tensor.");
  }

  uint32_t next_tag() { return tag_++ & 0xffffff; }

  template <typename F>
  void run(const char* op, F&& f) {
    if (broken_) {
      throw Error(std::string("[") + op + "] the process group failed earlier (" + broken_why_ +
                  "); call lazyx::dist::destroy() and init() again on every rank.");
    }
    try {
      f();
    } catch (const std::exception& e) {
      broken_ = true;
      broken_why_ = e.what();
      throw Error(std::string("[") + op + "] rank " + std::to_string(rank()) +
                  " failed: " + e.what() +
                  ". Another rank died, stopped or ran a different program, or the timeout "
                  "(LAZYX_DIST_TIMEOUT) passed.");
    }
  }

  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::unique_ptr<ControlChannel> ctl_;
  uint32_t tag_ = 1;
  bool broken_ = false;
  std::string broken_why_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(int rank, int world_size, const Store& store,
                                              double timeout_s) {
  return std::make_unique<GlooGroup>(rank, world_size, store, timeout_s);
}

}  // namespace lazyx::dist
