#include "backends/cpu/core_budget.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace lazyx::cpu {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::optional<int64_t> read_int(const std::string& path) {
  auto t = read_text(path);
  if (!t) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(t->c_str(), &end, 10);
  if (end == t->c_str()) return std::nullopt;
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
  }
  return out;
}

std::optional<int> quota_cores_v2(std::string_view cpu_max) {
  std::istringstream in{std::string(cpu_max)};
  std::string quota;
  int64_t period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const long long q = std::strtoll(quota.c_str(), &end, 10);
  if (end == quota.c_str() || q <= 0) return std::nullopt;
  return static_cast<int>(std::max<int64_t>(1, ceil_div(q, period)));
}

std::optional<int> quota_cores_v1(int64_t quota_us, int64_t period_us) {
  if (quota_us <= 0 || period_us <= 0) return std::nullopt;
  return static_cast<int>(std::max<int64_t>(1, ceil_div(quota_us, period_us)));
}

std::optional<int> cgroup_quota_cores(const std::string& root, const std::string& self_cgroup) {
  auto text = read_text(self_cgroup);
  if (!text) return std::nullopt;
  std::optional<int> best;
  auto keep = [&](std::optional<int> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-id:controllers:path"; v2 is "0::path", v1 lists "cpu" among the controllers.
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    // Inside a container the path is often the host's while the mount shows the container's own
    // cgroup at the root: try both.
    for (const std::string& dir : {path, std::string("/")}) {
      if (controllers.empty()) {
        for (const char* mount : {"", "/unified"}) {
          if (auto t = read_text(root + mount + dir + "/cpu.max")) keep(quota_cores_v2(*t));
        }
        continue;
      }
      std::stringstream cs(controllers);
      for (std::string c; std::getline(cs, c, ',');) {
        if (c != "cpu") continue;
        for (const std::string& mount : {std::string("/cpu"), std::string("/cpu,cpuacct")}) {
          const std::string d = root + mount + dir;
          auto q = read_int(d + "/cpu.cfs_quota_us"), p = read_int(d + "/cpu.cfs_period_us");
          if (q && p) keep(quota_cores_v1(*q, *p));
        }
      }
    }
  }
  return best;
}

int core_budget() {
  int n = static_cast<int>(allowed_cpus().size());
  if (n == 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (auto q = cgroup_quota_cores()) n = n > 0 ? std::min(n, *q) : *q;
  return std::max(1, n);
}

}  // namespace lazyx::cpu
