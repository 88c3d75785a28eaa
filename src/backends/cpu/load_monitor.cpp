#include "backends/cpu/load_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>

#include "backends/cpu/core_budget.h"
#include "graph/diagnostics.h"
#include "lazyx/metrics.h"

namespace lazyx::cpu {

namespace {

constexpr int64_t kPeriodNs = 100'000'000;   // one estimate per 100 ms window
constexpr int64_t kFreshNs = 1'000'000'000;  // a window longer than this replaces the estimate
constexpr double kHysteresis = 0.65;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One line of debug output (LAZYX_DEBUG >= 1, to LAZYX_DEBUG_FILE if set). Never throws: the
// sync already checked both variables, and a parallel loop is no place to fail.
void log_change(int w, double busy_cores, int ncpu) {
  try {
    if (graph::diag::level() < 1) return;
    char line[200];
    std::snprintf(line, sizeof line,
                  "lazyx: the thread pool runs %d thread%s: other processes keep %.1f of %d cores "
                  "busy (LAZYX_ADAPTIVE_THREADS=0 keeps all)\n",
                  w, w == 1 ? "" : "s", busy_cores, ncpu);
    graph::diag::print(line);
  } catch (...) {
  }
}

bool read_proc_stat(std::string& text) {
  int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  text.clear();
  char buf[8192];
  for (ssize_t got; (got = ::read(fd, buf, sizeof(buf))) > 0;) text.append(buf, got);
  ::close(fd);
  return !text.empty();
}

}  // namespace

LoadMonitor::LoadMonitor(int max_threads)
    : max_(std::max(1, max_threads)), width_(max_), cpus_(allowed_cpus()) {
  readable_ = max_ > 1 && !cpus_.empty();
}

int LoadMonitor::next_width(int current, double free_cores, int max_threads) {
  int w = current;
  if (free_cores > current + kHysteresis) {
    w = static_cast<int>(std::floor(free_cores + 1 - kHysteresis));
  } else if (free_cores < current - kHysteresis) {
    w = static_cast<int>(std::ceil(free_cores - 1 + kHysteresis));
  }
  return std::clamp(w, 1, std::max(1, max_threads));
}

bool LoadMonitor::parse_stat(std::string_view text, const std::vector<int>& cpus, uint64_t& busy,
                             uint64_t& total) {
  busy = total = 0;
  size_t found = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] == ' ') continue;
    std::string s(line.substr(3));
    int id = 0;
    unsigned long long f[10] = {};
    const int n =
        std::sscanf(s.c_str(), "%d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &id, &f[0],
                    &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9]);
    if (n < 5 || std::find(cpus.begin(), cpus.end(), id) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    uint64_t all = 0;
    for (int k = 0; k < std::min(n - 1, 8); ++k) all += f[k];
    total += all;
    busy += all - f[3] - f[4];
    ++found;
  }
  return found == cpus.size();
}

bool LoadMonitor::sample(uint64_t& busy, uint64_t& total, int64_t& own_ns) const {
  std::string text;
  timespec ts;
  if (!read_proc_stat(text) || !parse_stat(text, cpus_, busy, total)) return false;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return false;
  own_ns = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  return true;
}

int LoadMonitor::width() {
  if (!readable_) return width_;
  if (!enabled_.load(std::memory_order_relaxed)) {
    last_ns_ = next_ns_ = 0;  // start afresh when turned on again
    free_ = -1;
    return width_ = max_;
  }
  const int64_t now = steady_ns();
  if (now < next_ns_) return width_;
  next_ns_ = now + kPeriodNs;
  uint64_t busy, total;
  int64_t own;
  if (!sample(busy, total, own)) {  // no /proc: run at full width from now on
    readable_ = false;
    return width_ = max_;
  }
  const bool first = last_ns_ == 0;
  const int64_t wall = now - last_ns_;
  const uint64_t dbusy = busy - busy_, dtotal = total - total_;
  const int64_t down = own - own_ns_;
  if (!first && dtotal == 0) return width_;  // no tick yet: keep the window open
  last_ns_ = now, busy_ = busy, total_ = total, own_ns_ = own;
  if (first || wall <= 0) return width_;
  const double ncpu = static_cast<double>(cpus_.size());
  const double machine = ncpu * static_cast<double>(std::min(dbusy, dtotal)) / dtotal;
  const double mine = static_cast<double>(down) / static_cast<double>(wall);
  const double free_cores = ncpu - std::max(0.0, machine - mine);
  free_ = (free_ < 0 || wall > kFreshNs) ? free_cores : 0.5 * free_ + 0.5 * free_cores;
  const int w = next_width(width_, free_, max_);
  if (w != width_) {
    metrics::add_counter(w < width_ ? "CpuPoolNarrowed" : "CpuPoolWidened");
    log_change(w, ncpu - free_, static_cast<int>(ncpu));
    width_ = w;
  }
  return width_;
}

}  // namespace lazyx::cpu
