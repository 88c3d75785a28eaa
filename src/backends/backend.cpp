#include "backends/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "ir/shape_infer.h"
#include "lazyx/debug.h"
#include "lazyx/error.h"
#include "tensor/tensor_impl.h"

namespace lazyx::backend {

bool writes_over_operand0(const LoweredGraph& g, int32_t x) {
  const Instr& in = g.instrs[x];
  if (in.inputs.empty()) return false;
  const int32_t y = in.inputs[0];
  if (std::count(in.inputs.begin(), in.inputs.end(), y) != 1) return false;
  const ir::OpInfo& info = ir::op_info(in.op);
  return info.updates_operand0 || (info.elementwise_inplace_ok && g.instrs[y].shape == in.shape &&
                                   g.instrs[y].dtype == in.dtype);
}

runtime::BufferPtr Backend::allocate(size_t bytes) { return std::make_shared<runtime::Buffer>(bytes); }

void Backend::upload(runtime::Buffer& dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst.data(), src, bytes);
  dst.bump_version();
}

void Backend::download(const runtime::Buffer& src, void* dst, size_t bytes) {
  if (bytes) std::memcpy(dst, src.data(), bytes);
}

namespace {

using Factory = std::function<std::unique_ptr<Backend>()>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> f = {
      {"reference", [] { return make_reference_backend(); }},
#ifdef LAZYX_HAVE_CPU_BACKEND
      {"cpu", [] { return make_cpu_backend(); }},
#endif
  };
  return f;
}

std::unique_ptr<Backend>& active_slot() {
  static std::unique_ptr<Backend>* b = new std::unique_ptr<Backend>();
  return *b;
}

std::unique_ptr<Backend> create(const std::string& name) {
  auto it = factories().find(name);
  if (it == factories().end()) {
    std::string known;
    for (const auto& [k, v] : factories()) known += (known.empty() ? "" : ", ") + k;
    throw Error("[backend] unknown backend '" + name + "'. Known backends: " + known +
                ". Set LAZYX_BACKEND to one of them.");
  }
  return it->second();
}

Backend& ensure() {
  auto& slot = active_slot();
  if (!slot) {
    const char* env = std::getenv("LAZYX_BACKEND");
    // The compiling backend is the default where it is built; the reference stays the oracle.
    const char* dflt = factories().count("cpu") ? "cpu" : "reference";
    slot = create(env && *env ? env : dflt);
  }
  return *slot;
}

}  // namespace

Backend& active_backend(const char* op) {
  Backend& b = ensure();
  if (!b.alive()) {
    ir::fail(op, "backend '" + b.name() +
                     "' is dead (set_backend_alive(false)); nothing was run and every tensor is "
                     "as it was. Revive it or choose another backend with set_backend().");
  }
  return b;
}

}  // namespace lazyx::backend

namespace lazyx {

std::string backend_name() {
  EngineLock lock(engine_mutex());
  return backend::ensure().name();
}

std::vector<std::string> backend_names() {
  std::vector<std::string> r;
  for (const auto& [k, v] : backend::factories()) r.push_back(k);
  return r;
}

void clear_program_cache();

void set_backend(const std::string& name) {
  EngineLock lock(engine_mutex());
  auto& slot = backend::active_slot();
  if (slot && slot->name() == name) {
    slot->set_alive(true);
    return;
  }
  auto b = backend::create(name);
  // Buffers are host memory on every backend we have, so live tensors carry over; programs
  // do not, and the cache key includes the backend anyway.
  slot = std::move(b);
}

void set_num_threads(int n) {
  EngineLock lock(engine_mutex());
  backend::Backend& b = backend::ensure();
  if (n < 1 || n > b.max_threads()) {
    throw Error("[set_num_threads] " + std::to_string(n) + " threads asked; backend '" + b.name() +
                "' runs 1 to " + std::to_string(b.max_threads()) +
                ". To run more, set LAZYX_NUM_THREADS before the first use of lazyx");
  }
  b.set_num_threads(n);
}

int get_num_threads() {
  EngineLock lock(engine_mutex());
  return backend::ensure().num_threads();
}

int get_max_threads() {
  EngineLock lock(engine_mutex());
  return backend::ensure().max_threads();
}

void set_backend_alive(bool alive) {
  EngineLock lock(engine_mutex());
  backend::ensure().set_alive(alive);
}

}  // namespace lazyx
