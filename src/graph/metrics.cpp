// Counters and value metrics, named as in PyTorch/XLA so users find them where they look.
#include "lazyx/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

namespace lazyx::metrics {

namespace {

constexpr size_t kMaxSamples = 1024;

struct Metric {
  MetricData data;
  size_t next = 0;  // ring position once full
};

// The entries a step touches, found again without walking the map: slot by the name's address,
// then one comparison of the name itself (so a reused address cannot hit the wrong entry).
template <class V>
struct HotCache {
  struct Slot {
    const std::string* key = nullptr;
    V* value = nullptr;
  };
  Slot slots[16];

  template <class Map>
  V& find(Map& map, std::string_view name) {
    Slot& s = slots[(reinterpret_cast<uintptr_t>(name.data()) >> 3) & 15];
    if (s.key && *s.key == name) return *s.value;
    auto it = map.find(name);
    if (it == map.end()) it = map.emplace(std::string(name), V()).first;
    s = {&it->first, &it->second};
    return it->second;
  }
  void clear() {
    for (Slot& s : slots) s = {};
  }
};

struct Registry {
  std::mutex mu;
  // Transparent comparators: a lookup by literal builds no string (a step adds five).
  std::map<std::string, int64_t, std::less<>> counters;
  std::map<std::string, Metric, std::less<>> metrics;
  HotCache<int64_t> hot_counters;
  HotCache<Metric> hot_metrics;
};

Registry& reg() {
  static Registry* r = new Registry();
  return *r;
}

bool is_time(const std::string& name) { return name.size() > 4 && name.substr(name.size() - 4) == "Time"; }

std::string fmt(const std::string& name, double v) {
  char buf[64];
  if (is_time(name)) {  // nanoseconds
    if (v >= 1e9) {
      std::snprintf(buf, sizeof(buf), "%.3fs", v / 1e9);
    } else if (v >= 1e6) {
      std::snprintf(buf, sizeof(buf), "%.3fms", v / 1e6);
    } else {
      std::snprintf(buf, sizeof(buf), "%.3fus", v / 1e3);
    }
  } else {
    std::snprintf(buf, sizeof(buf), "%.6g", v);
  }
  return buf;
}

}  // namespace

void add_counter(std::string_view name, int64_t delta) {
  Registry& r = reg();
  std::lock_guard<std::mutex> l(r.mu);
  r.hot_counters.find(r.counters, name) += delta;
}

namespace {
// Under the registry's lock.
void add_sample_locked(Registry& r, std::string_view name, double value) {
  Metric& m = r.hot_metrics.find(r.metrics, name);
  m.data.total_samples++;
  m.data.accumulator += value;
  if (m.data.samples.size() < kMaxSamples) {
    m.data.samples.push_back(value);
  } else {
    m.data.samples[m.next] = value;
    m.next = (m.next + 1) % kMaxSamples;
  }
}
}  // namespace

void add_sample(std::string_view name, double value) {
  Registry& r = reg();
  std::lock_guard<std::mutex> l(r.mu);
  add_sample_locked(r, name, value);
}

void Batch::flush() {
  if (n_ == 0) return;
  Registry& r = reg();
  std::lock_guard<std::mutex> l(r.mu);
  for (int i = 0; i < n_; ++i) {
    const Item& it = items_[i];
    if (it.counter) {
      r.hot_counters.find(r.counters, it.name) += static_cast<int64_t>(it.value);
    } else {
      add_sample_locked(r, it.name, it.value);
    }
  }
  n_ = 0;
}

std::optional<int64_t> counter_value(const std::string& name) {
  std::lock_guard<std::mutex> l(reg().mu);
  auto it = reg().counters.find(name);
  if (it == reg().counters.end()) return std::nullopt;
  return it->second;
}

std::optional<MetricData> metric_data(const std::string& name) {
  std::lock_guard<std::mutex> l(reg().mu);
  auto it = reg().metrics.find(name);
  if (it == reg().metrics.end()) return std::nullopt;
  MetricData d = it->second.data;
  // Oldest first.
  std::rotate(d.samples.begin(), d.samples.begin() + it->second.next, d.samples.end());
  return d;
}

std::vector<std::string> counter_names() {
  std::lock_guard<std::mutex> l(reg().mu);
  std::vector<std::string> r;
  for (const auto& [k, v] : reg().counters) r.push_back(k);
  return r;
}

std::vector<std::string> metric_names() {
  std::lock_guard<std::mutex> l(reg().mu);
  std::vector<std::string> r;
  for (const auto& [k, v] : reg().metrics) r.push_back(k);
  return r;
}

void clear_counters() {
  std::lock_guard<std::mutex> l(reg().mu);
  reg().counters.clear();
  reg().hot_counters.clear();
}

void clear_metrics() {
  std::lock_guard<std::mutex> l(reg().mu);
  reg().metrics.clear();
  reg().hot_metrics.clear();
}

void clear_all() {
  clear_counters();
  clear_metrics();
}

std::string metrics_report() {
  std::lock_guard<std::mutex> l(reg().mu);
  std::ostringstream os;
  for (const auto& [name, m] : reg().metrics) {
    const MetricData& d = m.data;
    os << "Metric: " << name << "\n";
    os << "  TotalSamples: " << d.total_samples << "\n";
    os << "  Accumulator: " << fmt(name, d.accumulator) << "\n";
    if (!d.samples.empty()) {
      std::vector<double> s = d.samples;
      std::sort(s.begin(), s.end());
      auto pct = [&](double q) { return s[std::min(s.size() - 1, static_cast<size_t>(q * s.size()))]; };
      os << "  Percentiles: 1%=" << fmt(name, pct(0.01)) << "; 5%=" << fmt(name, pct(0.05))
         << "; 10%=" << fmt(name, pct(0.10)) << "; 20%=" << fmt(name, pct(0.20))
         << "; 50%=" << fmt(name, pct(0.50)) << "; 80%=" << fmt(name, pct(0.80))
         << "; 90%=" << fmt(name, pct(0.90)) << "; 95%=" << fmt(name, pct(0.95))
         << "; 99%=" << fmt(name, pct(0.99)) << "\n";
    }
  }
  for (const auto& [name, v] : reg().counters) {
    os << "Counter: " << name << "\n  Value: " << v << "\n";
  }
  return os.str();
}

}  // namespace lazyx::metrics
