// The TCP store: a tiny request/response protocol (SET key value, GET key) served by a thread of
// rank 0. Messages: u8 command, u32 key length, key, u32 value length, value.
#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "lazyx/error.h"

namespace lazyx::dist {

namespace {

constexpr uint8_t kSet = 1, kGet = 2;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error("[dist.init] TCP store " + where + ": " + what);
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool write_blob(int fd, const char* p, uint32_t n) {
  return write_all(fd, &n, 4) && (n == 0 || write_all(fd, p, n));
}

bool read_blob(int fd, std::string* out) {
  uint32_t n;
  if (!read_all(fd, &n, 4) || n > (64u << 20)) return false;
  out->resize(n);
  return n == 0 || read_all(fd, out->data(), n);
}

void set_timeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

addrinfo* resolve(const std::string& host, int port, int socktype) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) fail(host + ":" + std::to_string(port), std::string("cannot resolve: ") + gai_strerror(rc));
  return res;
}

}  // namespace

// Rank 0's server: one thread polls the listening socket and the clients.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = listen_fd_ >= 0;
    if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd_ < 0) fail("server", std::strerror(errno));
    int one = 1, zero = 0;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
      setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(listen_fd_, 64) != 0) {
      int e = errno;
      ::close(listen_fd_);
      fail("port " + std::to_string(port), std::string("rank 0 cannot listen: ") + std::strerror(e) +
                                               ". Choose a free port (MASTER_PORT).");
    }
    if (::pipe(wake_) != 0) fail("server", std::strerror(errno));
    thread_ = std::thread([this] { loop(); });
  }
  ~TcpStoreServer() {
    char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
    for (int fd : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  void loop() {
    for (;;) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (int fd : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c >= 0) {
          set_timeouts(c, std::chrono::milliseconds(5000));
          clients_.push_back(c);
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (!serve_one(fds[i].fd)) {
          ::close(fds[i].fd);
          clients_.erase(std::find(clients_.begin(), clients_.end(), fds[i].fd));
        }
      }
    }
  }

  bool serve_one(int fd) {
    uint8_t cmd;
    std::string key, val;
    if (!read_all(fd, &cmd, 1) || !read_blob(fd, &key)) return false;
    if (cmd == kSet) {
      if (!read_blob(fd, &val)) return false;
      data_[key] = std::move(val);
      uint8_t ok = 1;
      return write_all(fd, &ok, 1);
    }
    if (cmd != kGet) return false;
    auto it = data_.find(key);
    uint8_t found = it != data_.end();
    if (!write_all(fd, &found, 1)) return false;
    return !found || write_blob(fd, it->second.data(), static_cast<uint32_t>(it->second.size()));
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<int> clients_;
  std::map<std::string, std::string> data_;
  std::thread thread_;
};

TcpStore::TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  if (serve) server_ = std::make_unique<TcpStoreServer>(port);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no address";
  while (fd_ < 0) {
    addrinfo* res = resolve(host, port, SOCK_STREAM);
    for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last = std::strerror(errno);
        ::close(fd);
      }
    }
    freeaddrinfo(res);
    if (fd_ >= 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fail(where_, "cannot connect to rank 0 within the timeout (" + last +
                       "). Is rank 0 running, and is the port reachable from this machine?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_timeouts(fd_, timeout);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  uint8_t cmd = kSet, ok = 0;
  if (!write_all(fd_, &cmd, 1) || !write_blob(fd_, key.data(), static_cast<uint32_t>(key.size())) ||
      !write_blob(fd_, data.data(), static_cast<uint32_t>(data.size())) || !read_all(fd_, &ok, 1)) {
    fail(where_, "lost the connection to rank 0 while setting '" + key + "'.");
  }
}

bool TcpStore::try_get(const std::string& key, std::vector<char>* out) {
  uint8_t cmd = kGet, found = 0;
  if (!write_all(fd_, &cmd, 1) || !write_blob(fd_, key.data(), static_cast<uint32_t>(key.size())) ||
      !read_all(fd_, &found, 1)) {
    fail(where_, "lost the connection to rank 0 while reading '" + key + "'.");
  }
  if (!found) return false;
  std::string v;
  if (!read_blob(fd_, &v)) fail(where_, "lost the connection to rank 0 while reading '" + key + "'.");
  if (out) out->assign(v.begin(), v.end());
  return true;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> v;
  try_get(key, &v);
  return v;
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& k : keys) {
    while (!try_get(k, nullptr)) {
      if (std::chrono::steady_clock::now() > deadline) {
        fail(where_, "key '" + k + "' did not appear within the timeout: not every rank joined "
                                   "(check world_size, the ranks and LAZYX_DIST_TIMEOUT).");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

std::string local_address_towards(const std::string& host, int port) {
  addrinfo* res = resolve(host, port, SOCK_DGRAM);
  std::string out;
  for (addrinfo* a = res; a && out.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {0};
      if (local.ss_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, buf, sizeof buf);
      } else {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, buf, sizeof buf);
      }
      out = buf;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  if (out.empty()) fail(host + ":" + std::to_string(port), "no local interface reaches this host.");
  return out;
}

}  // namespace lazyx::dist
