// lazyx::dist set-up and the engine's side of collectives: the group registry, the timeout, the
// order token and the check that every rank runs the same program.
#include "dist/process_group.h"

#include <signal.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lazyx/error.h"
#include "tensor/tensor_impl.h"

namespace lazyx::dist {

namespace {

std::unique_ptr<ProcessGroup>& group_slot() {
  static std::unique_ptr<ProcessGroup>* g = new std::unique_ptr<ProcessGroup>();
  return *g;
}

ir::NodePtr& token_slot() {
  static ir::NodePtr* t = new ir::NodePtr();
  return *t;
}

std::string hex(uint64_t h) {
  char b[24];
  std::snprintf(b, sizeof b, "%016" PRIx64, h);
  return b;
}

}  // namespace

Store Store::file(std::string path) {
  Store s;
  s.kind = Kind::File;
  s.path = std::move(path);
  return s;
}

Store Store::tcp(std::string host, int port) {
  Store s;
  s.kind = Kind::Tcp;
  s.host = std::move(host);
  s.port = port;
  return s;
}

double timeout_seconds() {
  const char* env = std::getenv("LAZYX_DIST_TIMEOUT");
  if (!env || !*env) return 60.0;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(env, &end);
  if (errno || end == env || *end != '\0' || !(v > 0) || v > 1e7) {
    throw Error(std::string("[dist] LAZYX_DIST_TIMEOUT='") + env +
                "' is not a positive number of seconds; set it to e.g. 60 or unset it.");
  }
  return v;
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

bool has_group() { return group_slot() != nullptr; }

ProcessGroup& group(const char* op) {
  auto& g = group_slot();
  if (!g) {
    throw Error(std::string("[") + op +
                "] the process group is not initialized; call lazyx::dist::init(rank, "
                "world_size, store) (Python: lazyx.dist.init) on every rank first.");
  }
  return *g;
}

void init(int rank, int world_size, const Store& store) {
  EngineLock lock(engine_mutex());
  if (group_slot()) {
    throw Error("[dist.init] the process group is already initialized (rank " +
                std::to_string(group_slot()->rank()) + " of " +
                std::to_string(group_slot()->size()) + "); call destroy() first.");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error("[dist.init] rank " + std::to_string(rank) + " is out of range for world_size " +
                std::to_string(world_size) + "; expected 0 <= rank < world_size.");
  }
  if (store.kind == Store::Kind::File && store.path.empty()) {
    throw Error("[dist.init] the file store needs a directory path every rank can see.");
  }
  if (store.kind == Store::Kind::Tcp &&
      (store.host.empty() || store.port <= 0 || store.port > 65535)) {
    throw Error("[dist.init] the TCP store needs the host of rank 0 and a port in 1..65535, got '" +
                store.host + ":" + std::to_string(store.port) + "'.");
  }
  double t = timeout_seconds();
  // A peer that dies closes its sockets; writing to one would kill this process by SIGPIPE
  // instead of raising. Ignore the signal unless the program installed its own handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  group_slot() = make_gloo_group(rank, world_size, store, t);
  token_slot().reset();
}

void destroy() {
  EngineLock lock(engine_mutex());
  group_slot().reset();
  token_slot().reset();
}

bool is_initialized() {
  EngineLock lock(engine_mutex());
  return has_group();
}

int rank() {
  EngineLock lock(engine_mutex());
  return group("dist.rank").rank();
}

int world_size() {
  EngineLock lock(engine_mutex());
  return group("dist.world_size").size();
}

ir::NodePtr take_token() { return token_slot(); }
void set_token(ir::NodePtr n) { token_slot() = std::move(n); }

void on_sync_start(bool mark_step) {
  if (mark_step) token_slot().reset();
}

bool on_program(const std::vector<const ir::Node*>& order) {
  bool any = false;
  const ir::Node* tok = token_slot().get();
  for (const ir::Node* n : order) {
    if (ir::op_info(n->op()).family != ir::OpFamily::Collective) continue;
    any = true;
    if (n == tok) token_slot().reset();
  }
  return any;
}

void agree_on_program(const char* op, uint64_t graph_hash) {
  ProcessGroup& g = group(op);
  std::vector<int64_t> all(static_cast<size_t>(g.size()));
  int64_t mine = static_cast<int64_t>(graph_hash);
  try {
    g.exchange(&mine, all.data(), sizeof mine);
  } catch (const Error& e) {
    throw Error(std::string("[") + op + "] rank " + std::to_string(g.rank()) +
                " was about to run graph " + hex(graph_hash) +
                " (it has collectives) but the other ranks did not join within " +
                std::to_string(timeout_seconds()) +
                " s (LAZYX_DIST_TIMEOUT): a rank stopped, died or ran a different sequence of "
                "syncs. " +
                e.what());
  }
  std::string diff;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != mine) {
      diff += (diff.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) +
              " runs graph " + hex(static_cast<uint64_t>(all[r]));
    }
  }
  if (!diff.empty()) {
    throw Error(std::string("[") + op +
                "] the ranks disagree on the program with collectives: rank " +
                std::to_string(g.rank()) + " runs graph " + hex(graph_hash) + ", " + diff +
                ". Every rank must trace the same ops and sync the same way (a value read with "
                ".item() or print on one rank only runs an extra program there). Nothing ran.");
  }
}

void all_reduce_host(void* data, int64_t count, Dtype dtype, ReduceOp op) {
  EngineLock lock(engine_mutex());
  ProcessGroup& g = group("all_reduce");
  g.all_reduce(data, count, dtype, op);
  if (op == ReduceOp::Mean) {
    double s = 1.0 / g.size();
    if (dtype == kFloat32) {
      auto* p = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<float>(p[i] * s);
    } else if (dtype == kFloat64) {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] *= s;
    } else {
      throw Error("[all_reduce] mean of host values needs float32 or float64.");
    }
  }
}

void broadcast_host(void* data, int64_t count, Dtype dtype, int root) {
  EngineLock lock(engine_mutex());
  ProcessGroup& g = group("broadcast");
  if (root < 0 || root >= g.size()) {
    throw Error("[broadcast] root " + std::to_string(root) + " is not a rank of a group of " +
                std::to_string(g.size()) + ".");
  }
  g.broadcast(data, count, dtype, root);
}

void all_gather_host(const void* in, void* out, int64_t count, Dtype dtype) {
  EngineLock lock(engine_mutex());
  group("all_gather").all_gather(in, out, count, dtype);
}

void barrier() {
  EngineLock lock(engine_mutex());
  group("barrier").barrier();
}

}  // namespace lazyx::dist
