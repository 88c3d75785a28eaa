// Counters and value metrics under PyTorch/XLA's names (CachedCompile, InputOutputAliasCount...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lazyx::metrics {

struct MetricData {
  int64_t total_samples = 0;
  double accumulator = 0;
  std::vector<double> samples;  // the most recent samples, oldest first
};

std::optional<int64_t> counter_value(const std::string& name);
std::optional<MetricData> metric_data(const std::string& name);
std::vector<std::string> counter_names();
std::vector<std::string> metric_names();
void clear_counters();
void clear_metrics();
void clear_all();
std::string metrics_report();

// For the engine and the bridge.
void add_counter(std::string_view name, int64_t delta = 1);
void add_sample(std::string_view name, double value);

// Updates applied together under one lock when the batch ends (a sync makes about six). Names
// must outlive the batch (literals).
class Batch {
 public:
  Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() {
    try {
      flush();
    } catch (...) {  // out of memory for a new metric's name: drop the batch, never terminate
    }
  }
  void counter(std::string_view name, int64_t delta = 1) {
    add(name, static_cast<double>(delta), true);
  }
  void sample(std::string_view name, double value) { add(name, value, false); }
  void flush();

 private:
  struct Item {
    std::string_view name;
    double value;
    bool counter;
  };
  void add(std::string_view name, double value, bool counter) {
    if (n_ == kMax) flush();
    items_[n_++] = {name, value, counter};
  }
  static constexpr int kMax = 8;
  Item items_[kMax];
  int n_ = 0;
};

}  // namespace lazyx::metrics
