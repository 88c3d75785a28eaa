// A key-value store over TCP for the rendezvous of ranks on several machines: rank 0 serves it
// on a port, every rank (rank 0 too) is a client. Gloo ships file and Redis stores only.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace lazyx::dist {

class TcpStoreServer;

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Rank 0 (`serve`) listens on `port` on every interface; all ranks connect to host:port,
  // retrying until `timeout` passes.
  TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until the key exists or the timeout passes.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  bool try_get(const std::string& key, std::vector<char>* out);
  std::string where_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;
  int fd_ = -1;
};

// The local address of the interface that reaches host:port (for the Gloo device to bind).
std::string local_address_towards(const std::string& host, int port);

}  // namespace lazyx::dist
