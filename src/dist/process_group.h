// The process group behind lazyx::dist: the transport interface the collective kernels call, the
// order token of traced collectives, and the per-program agreement check.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/reference/kernels.h"
#include "ir/node.h"
#include "lazyx/dist.h"

namespace lazyx::dist {

// Moves bytes between ranks. Every call is collective: all ranks make the same calls in the
// same order. Failures (a timeout, a closed connection) raise lazyx::Error.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place; Mean reduces as Sum (the caller scales).
  virtual void all_reduce(void* data, int64_t count, Dtype dtype, ReduceOp op) = 0;
  virtual void all_gather(const void* in, void* out, int64_t count, Dtype dtype) = 0;
  virtual void broadcast(void* data, int64_t count, Dtype dtype, int root) = 0;
  virtual void barrier() = 0;
  // Small control messages (the per-step program agreement): every rank's bytes, in rank order.
  virtual void exchange(const void* mine, void* all, size_t bytes) {
    all_gather(mine, all, static_cast<int64_t>(bytes), kUInt8);
  }
};

// The group, or a clear error naming `op` when init() has not run.
ProcessGroup& group(const char* op);
bool has_group();
// Implemented by the Gloo group (gloo_group.cpp), or raising when lazyx was built without it.
std::unique_ptr<ProcessGroup> make_gloo_group(int rank, int world_size, const Store& store,
                                              double timeout_s);

// The order token: the last collective traced since the token was reset. Each new collective
// takes it as its last operand, so collectives run in trace order and the order is in the hash.
ir::NodePtr take_token();
void set_token(ir::NodePtr n);

// Called by the executor. At each mark_step the token starts over. After the walk: whether the
// program runs collectives; a program that runs the token node resets it too.
void on_sync_start(bool mark_step);
bool on_program(const std::vector<const ir::Node*>& order);
// Before a program with collectives runs: every rank must be about to run the same graph.
// Raises naming the hashes of the ranks that differ, or the timeout.
void agree_on_program(const char* op, uint64_t graph_hash);

// Runs one collective instruction for either backend: operands and output are contiguous.
void run_collective(const backend::Instr& in, const std::vector<const reference::Val*>& args,
                    const reference::Val& out);

const char* reduce_name(ReduceOp op);

}  // namespace lazyx::dist
