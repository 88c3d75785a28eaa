// How many cores this process may use: the CPUs of its affinity mask, capped by a cgroup CPU
// quota (containers: docker --cpus, Kubernetes limits). The pool's default size; more threads
// than that would only wait for each other (under a quota, for the next period).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lazyx::cpu {

// The CPUs sched_getaffinity allows (empty if it fails).
std::vector<int> allowed_cpus();
// At least 1: the allowed CPUs, at most the quota's cores rounded up; hardware_concurrency()
// when neither is known.
int core_budget();

// The quota in cores, rounded up, from cgroup v2's cpu.max text ("max 100000" is none).
std::optional<int> quota_cores_v2(std::string_view cpu_max);
// The same from cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us (-1 is none).
std::optional<int> quota_cores_v1(int64_t quota_us, int64_t period_us);
// The quota of this process's cgroup, looked up through /proc/self/cgroup under `root`
// (normally /sys/fs/cgroup); none when there is no quota or no cgroup file.
std::optional<int> cgroup_quota_cores(const std::string& root = "/sys/fs/cgroup",
                                      const std::string& self_cgroup = "/proc/self/cgroup");

}  // namespace lazyx::cpu
