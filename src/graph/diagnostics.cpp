// Causes of syncs and compiles: the thread's SyncCause scopes, debug output (LAZYX_DEBUG,
// LAZYX_DEBUG_FILE, LAZYX_DEBUG_MAX_FRAMES), strict mode, per-site compile history with the
// CompileCause:<kind> counters and the recompile warning, and the timeline's sync spans.
#include "graph/diagnostics.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>

#include "graph/profile.h"
#include "lazyx/diagnostics.h"
#include "lazyx/error.h"
#include "lazyx/metrics.h"
#include "runtime/env.h"

namespace lazyx::graph::diag {
namespace {

struct Scope {
  std::string what;
  std::vector<std::string> frames;
};
thread_local std::vector<Scope> scopes;
std::pair<int64_t, double> last_sync_end{-1, 0};  // (profile generation, time); engine lock

std::atomic<int> level_override{-1};
std::atomic<bool> syncs_allowed{true};

// Compile history of one sync site: its latest programs, most recent first.
struct Site {
  std::deque<std::shared_ptr<Signature>> programs;
};

struct History {
  std::mutex mu;
  std::map<std::string, Site> sites;
  std::deque<std::string> site_order;                  // oldest first, to bound the map
  std::deque<std::pair<int64_t, std::string>> recent;  // (mark_step count, kind) per recompile
  bool warned = false;
};

History& history() {
  static History* h = new History();
  return *h;
}

constexpr size_t kProgramsPerSite = 8;
constexpr size_t kMaxSites = 256;
constexpr int64_t kWarnWindow = 10;   // mark_steps
constexpr size_t kWarnCompiles = 10;  // recompiles within the window

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// How far apart two graphs are: a structural difference outweighs many small ones.
size_t score(const std::vector<Difference>& d) {
  size_t s = 0;
  for (const Difference& x : d) s += std::string(x.kind) == "structure" ? 10 : 1;
  return s;
}

std::string ms_str(double ms) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", ms);
  return b;
}

const char* default_cause(SyncKind kind) {
  switch (kind) {
    case SyncKind::MarkStep:
      return "user mark_step";
    case SyncKind::Sync:
      return "partial sync";
    case SyncKind::Read:
      return "value read";
  }
  return "sync";
}

void warn_if_compiling_often(History& h, const std::string& kind) {
  const int64_t step = metrics::counter_value("MarkStep").value_or(0);
  h.recent.emplace_back(step, kind);
  while (!h.recent.empty() && h.recent.front().first < step - kWarnWindow + 1) {
    h.recent.pop_front();
  }
  if (h.warned || h.recent.size() < kWarnCompiles) return;
  h.warned = true;
  std::map<std::string, int> by_kind;
  for (const auto& r : h.recent) by_kind[r.second]++;
  std::ostringstream os;
  os << "lazyx: warning: " << h.recent.size() << " compiles in the last " << kWarnWindow
     << " steps; causes:";
  bool first = true;
  for (const auto& [k, n] : by_kind) {
    os << (first ? " " : ", ") << k << " " << n;
    first = false;
  }
  os << ". Each recompile costs a compile; run with LAZYX_DEBUG=1 to see where and why "
        "(counters CompileCause:<kind>).\n";
  std::fputs(os.str().c_str(), stderr);
}

void debug_block(const SyncContext& ctx, const StepReport& r) {
  std::ostringstream os;
  os << "[lazyx] " << r.kind << " #" << r.step << ": " << ctx.cause << "\n";
  if (r.ran_program) {
    os << "  graph " << hex(r.graph_hash) << " "
       << (r.cache_hit ? std::string("(cached)") : "compiled in " + ms_str(r.compile_ms) + " ms")
       << ": " << r.num_nodes << " nodes, " << r.num_parameters << " inputs, " << r.num_outputs
       << " outputs, " << r.num_donated << " donated\n";
  } else {
    os << "  nothing to run\n";
  }
  if (!r.cache_hit && r.ran_program) {
    os << "  compiled because: "
       << (r.compile_reason.empty() ? "first compile at this site" : r.compile_reason) << "\n";
  }
  const size_t n = std::min<size_t>(ctx.frames.size(), static_cast<size_t>(max_frames()));
  for (size_t i = 0; i < n; ++i) os << (i ? "     " : "  at ") << ctx.frames[i] << "\n";
  print(os.str());
}

}  // namespace

int max_frames() { return static_cast<int>(env::integer("LAZYX_DEBUG_MAX_FRAMES", 8, 0, 1000)); }

void reset_history() {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  h.sites.clear();
  h.site_order.clear();
  h.recent.clear();
  h.warned = false;
}

int level() {
  int o = level_override.load();
  if (o >= 0) return o;
  return env::debug_level();
}

namespace {
std::mutex print_mu;
std::string open_path;
FILE* file = nullptr;

// The debug output's stream (LAZYX_DEBUG_FILE, else stderr); raises if the file cannot be opened.
FILE* debug_stream() {
  const char* p = std::getenv("LAZYX_DEBUG_FILE");
  std::string path = p ? p : "";
  if (path != open_path) {
    if (file) std::fclose(file);
    file = path.empty() ? nullptr : std::fopen(path.c_str(), "a");
    if (!path.empty() && !file) {
      open_path.clear();
      throw Error("[debug] LAZYX_DEBUG_FILE=" + path +
                  " cannot be opened for writing; name a file in a folder that exists, or unset "
                  "it for stderr.");
    }
    open_path = path;
  }
  return file ? file : stderr;
}
}  // namespace

void print(const std::string& text) {
  std::lock_guard<std::mutex> lock(print_mu);
  FILE* out = debug_stream();
  std::fputs(text.c_str(), out);
  std::fflush(out);
}

SyncContext begin_sync(SyncKind kind, const char* op, const char* what, int level) {
  if (level >= 1) {  // a bad LAZYX_DEBUG_FILE raises now, before anything changes
    std::lock_guard<std::mutex> lock(print_mu);
    debug_stream();
  }
  SyncContext ctx;
  ctx.kind = kind;
  ctx.level = level;
  if (!scopes.empty()) {
    ctx.cause = scopes.front().what;
    for (const Scope& s : scopes) {  // the outermost scope that has frames
      if (!s.frames.empty()) {
        ctx.frames = s.frames;
        break;
      }
    }
  } else if (kind == SyncKind::Read && what) {
    ctx.cause = std::string("value read by ") + what + "()";
  } else {
    ctx.cause = default_cause(kind);
  }
  if (kind != SyncKind::MarkStep && !syncs_allowed.load()) {
    std::ostringstream os;
    os << "[" << (what ? what : op) << "] a sync other than mark_step while syncs are not allowed "
       << "(allow_sync(false)): " << ctx.cause;
    const size_t n = std::min<size_t>(ctx.frames.size(), static_cast<size_t>(max_frames()));
    for (size_t i = 0; i < n; ++i) os << (i ? "\n     " : "\n  at ") << ctx.frames[i];
    os << "\nMove the read after mark_step(), or allow syncs around it.";
    metrics::add_counter("StrictModeRefusedSync");
    throw Error(os.str());
  }
  if (profile::on()) {
    // The time since the previous sync ended (or the profile began) went to tracing.
    ctx.start_us = profile::now_us();
    const double from = last_sync_end.first == profile::generation() ? last_sync_end.second : 0;
    if (from < ctx.start_us) profile::record("tracing", "trace", from, ctx.start_us);
  }
  return ctx;
}

std::string explain_compile(const SyncContext& ctx, const backend::LoweredGraph& g,
                            const std::vector<ParamReport>& params, uint64_t key) {
  auto sig = std::make_shared<Signature>();
  sig->key = key;
  sig->graph = g;
  sig->params = params;
  // Where the sync comes from: its cause and innermost frame.
  const std::string where =
      ctx.cause + (ctx.frames.empty() ? std::string() : " at " + ctx.frames.front());
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  auto [it, fresh] = h.sites.emplace(where, Site{});
  if (fresh) {
    h.site_order.push_back(where);
    if (h.site_order.size() > kMaxSites) {
      h.sites.erase(h.site_order.front());
      h.site_order.pop_front();
    }
  }
  Site& site = it->second;
  std::string kind = "first_compile", text;
  std::vector<Difference> best;
  const Signature* nearest = nullptr;
  for (const auto& before : site.programs) {
    if (before->key == key) {  // compiled here before: the program cache dropped it
      nearest = before.get();
      best.clear();
      kind = "evicted";
      text = "the same graph compiled here before (graph " + hex(key) +
             ") left the program cache (LAZYX_COMPILATION_CACHE_SIZE, clear_program_cache)";
      break;
    }
    std::vector<Difference> d = differences(*sig, *before);
    if (!nearest || score(d) < score(best)) {
      nearest = before.get();
      best = std::move(d);
    }
  }
  if (nearest && kind != "evicted") {
    kind = "structure";  // unless a more specific difference names it
    for (const Difference& d : best) {
      if (std::string(d.kind) != "structure") {
        kind = d.kind;
        break;
      }
    }
    std::ostringstream os;
    for (size_t i = 0; i < best.size() && i < 3; ++i) os << (i ? "; " : "") << best[i].text;
    if (best.size() > 3) os << "; and " << best.size() - 3 << " more";
    if (best.empty()) os << "the graph differs in a way the comparison does not name";
    os << " (nearest program from this site: graph " << hex(nearest->key) << ")";
    text = os.str();
  }
  metrics::add_counter("CompileCause:" + kind);
  site.programs.push_front(std::move(sig));
  if (site.programs.size() > kProgramsPerSite) site.programs.pop_back();
  if (kind != "first_compile") warn_if_compiling_often(h, kind);
  return text;
}

void end_sync(const SyncContext& ctx, const StepReport& r) {
  if (ctx.start_us >= 0 && profile::on()) {
    std::ostringstream args;
    args << "\"cause\": " << profile::json_str(ctx.cause) << ", \"graph\": \"" << hex(r.graph_hash)
         << "\", \"nodes\": " << r.num_nodes << ", \"inputs\": " << r.num_parameters
         << ", \"outputs\": " << r.num_outputs << ", \"donated\": " << r.num_donated
         << ", \"cache_hit\": " << (r.cache_hit ? "true" : "false");
    if (!r.compile_reason.empty()) {
      args << ", \"compiled_because\": " << profile::json_str(r.compile_reason);
    }
    args << ", \"frames\": [";
    for (size_t i = 0; i < ctx.frames.size(); ++i) {
      args << (i ? ", " : "") << profile::json_str(ctx.frames[i]);
    }
    args << "]";
    const double end = profile::now_us();
    profile::record(std::string("sync: ") + ctx.cause, "sync", ctx.start_us, end, args.str());
    last_sync_end = {profile::generation(), end};
  }
  const int lv = ctx.level;
  if (lv >= 1 && (ctx.kind != SyncKind::MarkStep || (r.ran_program && !r.cache_hit))) {
    debug_block(ctx, r);
  }
  if (lv >= 2) print(r.to_string());
}

}  // namespace lazyx::graph::diag

namespace lazyx {

void set_debug(int level) {
  if (level < 0 || level > 2) {
    throw Error("[set_debug] level " + std::to_string(level) + " is not 0, 1 or 2.");
  }
  graph::diag::level_override.store(level);
}

int debug_level() { return graph::diag::level(); }

SyncCause::SyncCause(std::string what, std::vector<std::string> frames) {
  graph::diag::scopes.push_back({std::move(what), std::move(frames)});
}

SyncCause::~SyncCause() { graph::diag::scopes.pop_back(); }

bool sync_causes_wanted() {
  return profile::on() || !graph::diag::syncs_allowed.load() || graph::diag::level() >= 1;
}

int debug_max_frames() { return graph::diag::max_frames(); }

void allow_sync(bool allowed) { graph::diag::syncs_allowed.store(allowed); }
bool sync_allowed() { return graph::diag::syncs_allowed.load(); }

}  // namespace lazyx
