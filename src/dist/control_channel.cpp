// The control channel's mesh: rank r listens, publishes its address in the store, connects to
// every lower rank and accepts every higher one; messages carry a sequence number.
#include "dist/control_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "lazyx/error.h"

namespace lazyx::dist {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(int rank, const std::string& what) {
  throw Error("[dist] rank " + std::to_string(rank) + ": " + what);
}

std::string iface_address(const std::string& iface) {
  ifaddrs* list = nullptr;
  std::string out;
  if (getifaddrs(&list) != 0) return out;
  for (int family : {AF_INET, AF_INET6}) {
    for (ifaddrs* a = list; a && out.empty(); a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != family || iface != a->ifa_name) continue;
      char buf[INET6_ADDRSTRLEN] = {0};
      const void* src =
          family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr);
      if (inet_ntop(family, src, buf, sizeof buf)) out = buf;
    }
  }
  freeifaddrs(list);
  return out;
}

addrinfo* numeric(const std::string& host, const std::string& port, int rank) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) {
    fail(rank, "the control channel cannot use address '" + host + "'.");
  }
  return res;
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    double left = seconds_left(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

void write_all(int fd, const char* p, size_t n, int rank, int peer) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      fail(rank, "rank " + std::to_string(peer) +
                     " closed its control connection (it "
                     "stopped or died).");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads exactly n bytes before the deadline; "" on success, else what went wrong.
std::string read_all(int fd, char* p, size_t n, Clock::time_point deadline) {
  while (n) {
    if (!wait_fd(fd, POLLIN, deadline)) return "sent nothing within the timeout";
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return "closed its control connection (it stopped or died)";
    p += r;
    n -= static_cast<size_t>(r);
  }
  return "";
}

int connect_to(const std::string& addr, Clock::time_point deadline, int rank, int peer) {
  const size_t colon = addr.rfind(':');
  addrinfo* res = numeric(addr.substr(0, colon), addr.substr(colon + 1), rank);
  int fd = -1;
  while (fd < 0) {
    fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
    if (fd >= 0) close(fd);
    fd = -1;
    if (seconds_left(deadline) <= 0) {
      freeaddrinfo(res);
      fail(rank, "cannot connect the control channel to rank " + std::to_string(peer) + " at " +
                     addr + " within the timeout.");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(res);
  tune(fd);
  return fd;
}

}  // namespace

ControlChannel::ControlChannel(int rank, int size, gloo::rendezvous::Store& store,
                               const std::string& host, const std::string& iface, double timeout_s)
    : rank_(rank), size_(size), timeout_s_(timeout_s), fds_(static_cast<size_t>(size), -1) {
  if (size == 1) return;
  const auto deadline = after(timeout_s);
  const std::string ip = host.empty() ? iface_address(iface) : host;
  if (ip.empty()) fail(rank, "interface '" + iface + "' has no address (LAZYX_DIST_IFACE).");
  addrinfo* res = numeric(ip, "0", rank);
  int lfd = socket(res->ai_family, SOCK_STREAM, 0);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  const bool ok = lfd >= 0 && bind(lfd, res->ai_addr, res->ai_addrlen) == 0 &&
                  listen(lfd, size) == 0 &&
                  getsockname(lfd, reinterpret_cast<sockaddr*>(&bound), &len) == 0;
  freeaddrinfo(res);
  if (!ok) {
    if (lfd >= 0) close(lfd);
    fail(rank, "cannot listen for the control channel on " + ip + ": " + std::strerror(errno));
  }
  const int port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  const std::string mine = ip + ":" + std::to_string(port);
  try {
    store.set("lazyx-ctl/" + std::to_string(rank), std::vector<char>(mine.begin(), mine.end()));
    for (int peer = 0; peer < rank; ++peer) {
      const std::string key = "lazyx-ctl/" + std::to_string(peer);
      store.wait({key}, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
      std::vector<char> v = store.get(key);
      int fd = connect_to(std::string(v.begin(), v.end()), deadline, rank, peer);
      fds_[static_cast<size_t>(peer)] = fd;
      int32_t me = rank;
      write_all(fd, reinterpret_cast<const char*>(&me), sizeof me, rank, peer);
    }
    for (int k = rank + 1; k < size; ++k) {
      if (!wait_fd(lfd, POLLIN, deadline)) fail(rank, "a higher rank did not connect in time.");
      int fd = accept(lfd, nullptr, nullptr);
      if (fd < 0) fail(rank, std::string("accept failed: ") + std::strerror(errno));
      tune(fd);
      int32_t who = -1;
      std::string err = read_all(fd, reinterpret_cast<char*>(&who), sizeof who, deadline);
      if (!err.empty() || who <= rank || who >= size || fds_[static_cast<size_t>(who)] >= 0) {
        close(fd);
        fail(rank, "a bad control connection (not a rank of this group).");
      }
      fds_[static_cast<size_t>(who)] = fd;
    }
  } catch (...) {
    close(lfd);
    for (int& fd : fds_) {
      if (fd >= 0) close(fd);
    }
    throw;
  }
  close(lfd);
}

ControlChannel::~ControlChannel() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

void ControlChannel::all_gather(const void* mine, size_t bytes, void* all) {
  char* out = static_cast<char*>(all);
  std::memcpy(out + bytes * static_cast<size_t>(rank_), mine, bytes);
  if (size_ == 1) return;
  const uint64_t seq = ++seq_;
  std::vector<char> msg(sizeof seq + bytes);
  std::memcpy(msg.data(), &seq, sizeof seq);
  std::memcpy(msg.data() + sizeof seq, mine, bytes);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_)
      write_all(fds_[static_cast<size_t>(peer)], msg.data(), msg.size(), rank_, peer);
  }
  const auto deadline = after(timeout_s_);
  std::vector<char> in(msg.size());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    std::string err = read_all(fds_[static_cast<size_t>(peer)], in.data(), in.size(), deadline);
    if (!err.empty()) fail(rank_, "rank " + std::to_string(peer) + " " + err + ".");
    uint64_t theirs;
    std::memcpy(&theirs, in.data(), sizeof theirs);
    if (theirs != seq) {
      fail(rank_, "rank " + std::to_string(peer) + " is at control message " +
                      std::to_string(theirs) + ", this rank at " + std::to_string(seq) +
                      " (out of step after an earlier failure).");
    }
    std::memcpy(out + bytes * static_cast<size_t>(peer), in.data() + sizeof seq, bytes);
  }
}

}  // namespace lazyx::dist
