// The ranks' control channel: a full mesh of plain TCP connections for small messages (the
// program agreement before every step with collectives). The calling thread writes and reads
// them itself, one message each way, instead of Gloo's notify/ready handshake through its device
// thread; tensors still travel through Gloo.
#pragma once
#include <gloo/rendezvous/store.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lazyx::dist {

class ControlChannel {
 public:
  // Collective: every rank constructs one with the same store. `host` is the address to listen
  // on (as the Gloo device's); an empty host with `iface` set takes that interface's address.
  ControlChannel(int rank, int size, gloo::rendezvous::Store& store, const std::string& host,
                 const std::string& iface, double timeout_s);
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Every rank's `bytes` bytes into `all`, in rank order. Raises lazyx::Error when a rank does not
  // send within the timeout, closed its connection, or is at another message (out of step).
  void all_gather(const void* mine, size_t bytes, void* all);

 private:
  int rank_, size_;
  double timeout_s_;
  uint64_t seq_ = 0;
  std::vector<int> fds_;  // by rank; -1 for this rank
};

}  // namespace lazyx::dist
