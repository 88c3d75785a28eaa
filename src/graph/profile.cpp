// Chrome trace-event JSON ("X" complete events, one per span, with the OS thread id), opened by
// Perfetto (ui.perfetto.dev) and chrome://tracing.
#include "graph/profile.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <vector>

#include "lazyx/diagnostics.h"
#include "lazyx/error.h"

namespace lazyx::profile {

std::atomic<bool> g_on{false};
std::atomic<int64_t> g_generation{0};

int64_t generation() { return g_generation.load(); }

namespace {

struct Event {
  std::string name;
  const char* category;
  double start_us, end_us;
  int64_t tid;
  std::string args;
};

struct State {
  std::mutex mu;
  std::string path;
  std::vector<Event> events;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

State& state() {
  static State* s = new State();
  return *s;
}

int64_t thread_id() {
  thread_local int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - state().t0)
      .count();
}

void record(const std::string& name, const char* category, double start_us, double end_us,
            const std::string& args) {
  if (!on()) return;
  State& s = state();
  const int64_t tid = thread_id();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!on()) return;
  s.events.push_back({name, category, start_us, end_us, tid, args});
}

std::string json_str(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      case '\r': r += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          r += buf;
        } else {
          r += static_cast<char>(c);
        }
    }
  }
  return r + "\"";
}

}  // namespace lazyx::profile

namespace lazyx {

void profile_begin(const std::string& path) {
  auto& s = profile::state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (profile::on()) {
    throw Error("[profile_begin] a profile is already recording to " + s.path +
                "; call profile_end() first.");
  }
  if (path.empty()) throw Error("[profile_begin] the path is empty; name the JSON file to write.");
  {
    std::ofstream probe(path, std::ios::trunc);  // fail now, not after the work
    if (!probe) throw Error("[profile_begin] cannot write " + path + "; check the folder exists.");
  }
  s.path = path;
  s.events.clear();
  s.t0 = std::chrono::steady_clock::now();
  profile::g_generation.fetch_add(1);
  profile::g_on.store(true);
}

void profile_end() {
  auto& s = profile::state();
  std::vector<profile::Event> events;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!profile::on()) throw Error("[profile_end] no profile is recording; call profile_begin.");
    profile::g_on.store(false);
    events.swap(s.events);
    path.swap(s.path);
  }
  std::ofstream f(path, std::ios::trunc);
  const int64_t pid = static_cast<int64_t>(::getpid());
  f << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  f << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid
    << ", \"tid\": 0, \"args\": {\"name\": \"lazyx\"}}";
  char num[64];
  for (const auto& e : events) {
    f << ",\n{\"name\": " << profile::json_str(e.name) << ", \"cat\": \"" << e.category
      << "\", \"ph\": \"X\", \"pid\": " << pid << ", \"tid\": " << e.tid;
    std::snprintf(num, sizeof(num), "%.3f", e.start_us);
    f << ", \"ts\": " << num;
    std::snprintf(num, sizeof(num), "%.3f", std::max(0.0, e.end_us - e.start_us));
    f << ", \"dur\": " << num;
    if (!e.args.empty()) f << ", \"args\": {" << e.args << "}";
    f << "}";
  }
  f << "\n]}\n";
  f.close();
  if (!f) throw Error("[profile_end] cannot write " + path + ".");
}

bool profiling() { return profile::on(); }

ProfileSpan::ProfileSpan(const char* name, const char* category, std::string detail)
    : name_(name), category_(category), detail_(std::move(detail)) {
  if (profile::on()) start_us_ = profile::now_us();
}

ProfileSpan::~ProfileSpan() {
  if (start_us_ < 0 || !profile::on()) return;
  profile::record(name_, category_, start_us_, profile::now_us(),
                  detail_.empty() ? std::string() : "\"detail\": " + profile::json_str(detail_));
}

}  // namespace lazyx
