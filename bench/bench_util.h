// Helpers shared by the C++ benchmarks.
#pragma once

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

}  // namespace lazyx::bench
