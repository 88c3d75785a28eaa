// How many pool threads to run, given the other processes on the machine. Every 100 ms it reads
// the busy time of this process's cores from /proc/stat, subtracts the process's own CPU time,
// and leaves the remainder's cores to the other processes: three runnable threads on two cores
// make every parallel region wait out a time slice of whichever thread the scheduler preempted.
// The caller of the pool runs alone when no second core is free. Chunk boundaries never depend
// on the width, so results do not either.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lazyx::cpu {

class LoadMonitor {
 public:
  explicit LoadMonitor(int max_threads);
  // The width to run now, at most `max_threads`. Not thread-safe: the pool calls it while it
  // holds its run lock.
  int width();
  // Off: the full width (LAZYX_ADAPTIVE_THREADS=0, read at each program run). Any thread.
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

  // The width after one estimate of the cores free of other processes (hysteresis of 0.65 core,
  // so a half-busy core does not flip it back and forth).
  static int next_width(int current, double free_cores, int max_threads);
  // Sums the busy and total ticks of the `cpus` lines of /proc/stat's text; false when one is
  // missing. Busy is everything but idle and iowait (steal counts: the host took the core).
  static bool parse_stat(std::string_view text, const std::vector<int>& cpus, uint64_t& busy,
                         uint64_t& total);

 private:
  bool sample(uint64_t& busy, uint64_t& total, int64_t& own_ns) const;

  int max_;
  int width_;
  bool readable_;  // /proc/stat and the affinity mask are there
  std::atomic<bool> enabled_{true};
  std::vector<int> cpus_;  // the cores this process may run on
  int64_t next_ns_ = 0;    // steady-clock time of the next sample
  int64_t last_ns_ = 0;
  uint64_t busy_ = 0, total_ = 0;
  int64_t own_ns_ = 0;
  double free_ = -1;  // smoothed estimate; negative until the first window ends
};

}  // namespace lazyx::cpu
