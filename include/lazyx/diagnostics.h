// Why lazyx compiles and syncs: debug output, causes, strict mode and a timeline.
#pragma once

#include <string>
#include <vector>

namespace lazyx {

// Debug output (to stderr, or to the file LAZYX_DEBUG_FILE names): 0 quiet; 1 a short block for
// every compile and every sync that is not a mark_step (its cause, the caller's frames, the
// graph, why it compiled); 2 also every step report. The default comes from LAZYX_DEBUG.
void set_debug(int level);
int debug_level();

// Names why the calling thread syncs while the object lives, e.g. "value read by item()" or a
// C++ caller's scope ("eval loop"); `frames` are the caller's frames, innermost first. When
// scopes nest, the outermost names the cause. Shown by debug output, strict-mode errors and
// the timeline.
class SyncCause {
 public:
  explicit SyncCause(std::string what, std::vector<std::string> frames = {});
  ~SyncCause();
  SyncCause(const SyncCause&) = delete;
  SyncCause& operator=(const SyncCause&) = delete;
};

// Whether debug output, strict mode or a timeline would use causes and frames: callers that
// collect frames (the Python bindings) skip the work otherwise.
bool sync_causes_wanted();
// How many of a cause's frames debug output and errors show (LAZYX_DEBUG_MAX_FRAMES, default 8).
int debug_max_frames();

// Strict mode: with allow_sync(false), any sync other than mark_step (a value read, a partial
// sync, a CPU fallback op's read) raises lazyx::Error naming its cause and frames, and changes
// nothing. Process-wide; the default is true.
void allow_sync(bool allowed);
bool sync_allowed();

// The timeline: between profile_begin and profile_end lazyx records tracing, each sync and its
// cause, compiles, every kernel and GEMM call with its thread, CPU fallback ops and host
// transfers; profile_end writes them to `path` as Chrome trace-event JSON (Perfetto,
// chrome://tracing). profile_begin while a profile runs raises lazyx::Error.
void profile_begin(const std::string& path);
void profile_end();
bool profiling();

// A span of the timeline on the calling thread (recorded only while profiling).
class ProfileSpan {
 public:
  ProfileSpan(const char* name, const char* category, std::string detail = {});
  ~ProfileSpan();
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  double start_us_ = -1;
  const char* name_;
  const char* category_;
  std::string detail_;
};

}  // namespace lazyx
