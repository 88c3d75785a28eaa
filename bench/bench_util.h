// Helpers shared by the C++ benchmarks.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace lazyx::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// LAZYX_NUM_THREADS when set to a positive number, else every core (what the backend uses).
inline int num_threads() {
  const char* e = std::getenv("LAZYX_NUM_THREADS");
  if (e && std::atoi(e) > 0) return std::atoi(e);
  return static_cast<int>(std::thread::hardware_concurrency());
}

// A competing load the benchmark starts itself: a child process that spins until stopped.
class BusyProcess {
 public:
  BusyProcess() : pid_(fork()) {
    if (pid_ == 0) {
      volatile unsigned long k = 0;
      for (;;) k = k + 1;
    }
  }
  ~BusyProcess() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  BusyProcess(const BusyProcess&) = delete;
  BusyProcess& operator=(const BusyProcess&) = delete;

 private:
  pid_t pid_;
};

}  // namespace lazyx::bench
