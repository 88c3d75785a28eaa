// Data parallel across processes: a process group run by Gloo over TCP, and collectives that are
// graph ops (they run inside the program of the next sync, in the same order on every rank).
#pragma once

#include <string>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx::dist {

// Where the ranks meet to exchange their addresses.
struct Store {
  enum class Kind { File, Tcp };
  Kind kind = Kind::File;
  std::string path;  // File: a directory every rank can see (one machine or a shared disk)
  std::string host;  // Tcp: the host rank 0 runs on, reachable from every rank
  int port = 0;      // Tcp: the port rank 0 listens on

  // A fresh (empty or missing) directory; keys left by an earlier run would be read as this one's.
  static Store file(std::string path);
  static Store tcp(std::string host, int port);
};

// Joins the group: blocks until all `world_size` ranks have called it (or the timeout passes).
// The device of each rank binds to the interface that reaches the store's host (or 127.0.0.1
// for a file store); LAZYX_DIST_IFACE names an interface instead.
void init(int rank, int world_size, const Store& store);
// Leaves the group; collectives then raise until the next init.
void destroy();
bool is_initialized();
int rank();        // raises when not initialized
int world_size();  // raises when not initialized
// LAZYX_DIST_TIMEOUT in seconds (default 60): how long a collective or the rendezvous waits for
// the other ranks before raising.
double timeout_seconds();

enum class ReduceOp { Sum = 0, Mean = 1, Max = 2, Min = 3 };

// The reduction of each tensor across ranks, times `scale` (Mean divides by the world size
// too). Tensors of one dtype travel packed in one buffer and one Gloo call.
std::vector<Tensor> all_reduce(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::Sum,
                               double scale = 1.0);
Tensor all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, double scale = 1.0);
// Every rank's tensor concatenated along dim 0 in rank order.
Tensor all_gather(const Tensor& tensor);
// The reduction across ranks, split along dim 0 into world_size blocks: this rank's block.
Tensor reduce_scatter(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, double scale = 1.0);
// Rank `root`'s tensor on every rank.
Tensor broadcast(const Tensor& tensor, int root);

// Runs a collective now on host memory (count elements of `dtype`, in place), outside any graph.
// For values that never live on the device (Python's CPU tensors given to the lazyx backend).
void all_reduce_host(void* data, int64_t count, Dtype dtype, ReduceOp op);
void broadcast_host(void* data, int64_t count, Dtype dtype, int root);
void all_gather_host(const void* in, void* out, int64_t count, Dtype dtype);
void barrier();

}  // namespace lazyx::dist
