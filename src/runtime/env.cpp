#include "runtime/env.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lazyx/error.h"

extern char** environ;

namespace lazyx::env {

namespace {

// A sync reads several LAZYX_* variables, and getenv compares every entry of the environment
// each time. One scan keeps the LAZYX_* entries and where they sit; it is redone when the
// environment changed. Inside a Snapshot (one sync) the environment is checked once.
//
// The check reads only the array's address, its last entry and end, and the LAZYX_* slots:
// setenv and putenv replace a variable's entry pointer in its slot or append one (a new end,
// or a new array); unsetenv shifts the entries after it down (a NULL at the old last slot).
//
// The cache is plain data, so the thread-local needs no construction guard (each access of a
// guarded one costs several calls into the dynamic linker). Beyond kMaxEntries LAZYX_*
// variables, lookups fall back to getenv.
struct Cache {
  static constexpr int kMaxEntries = 64;
  bool valid;
  bool overflow;  // more LAZYX_* variables than entries can hold
  int pinned;     // nested Snapshots
  char** array;   // environ when scanned
  int64_t count;  // its entries
  const char* last;                  // its last entry
  const char* entries[kMaxEntries];  // "LAZYX_...=value", read live: values edited in place show
  int64_t slots[kMaxEntries];        // where each sits in the array
  int entries_n;
  // Answers found since the last rescan, keyed by the name's address (names are literals).
  struct Memo {
    const char* name;
    const char* value;
  };
  Memo memo[16];
  int memo_n;
  uint64_t generation;  // this thread's last rescan, numbered across all threads
};
thread_local Cache cache_storage;  // zero-initialized
std::atomic<uint64_t> rescans{0};  // so that two threads' generations are never equal

// This thread's cache. One call per function: GCC otherwise asks the dynamic linker for a
// thread-local's address at each use.
[[gnu::noinline]] Cache& this_cache() { return cache_storage; }

bool unchanged(const Cache& c) {
  char** e = environ;
  if (!c.valid || e != c.array) return false;
  if (!e) return true;
  if (e[c.count] != nullptr || (c.count > 0 && e[c.count - 1] != c.last)) return false;
  for (int i = 0; i < c.entries_n; ++i) {
    if (e[c.slots[i]] != c.entries[i]) return false;
  }
  return true;
}

void refresh(Cache& c) {
  if (unchanged(c)) return;
  c.entries_n = 0;
  c.overflow = false;
  c.memo_n = 0;
  c.array = environ;
  int64_t n = 0;
  for (char** e = environ; e && e[n]; ++n) {
    if (std::strncmp(e[n], "LAZYX_", 6) != 0) continue;
    if (c.entries_n == Cache::kMaxEntries) {
      c.overflow = true;  // lookups use getenv, which sees every change
      continue;
    }
    c.slots[c.entries_n] = n;
    c.entries[c.entries_n++] = e[n];
  }
  c.count = n;
  c.last = n > 0 ? environ[n - 1] : nullptr;
  c.valid = true;
  c.generation = rescans.fetch_add(1, std::memory_order_relaxed) + 1;
}

const char* lookup(const char* name) {
  Cache& c = this_cache();
  if (!c.pinned) refresh(c);
  for (int i = 0; i < c.memo_n; ++i) {
    if (c.memo[i].name == name) return c.memo[i].value;
  }
  if (c.overflow || std::strncmp(name, "LAZYX_", 6) != 0) return std::getenv(name);
  const size_t n = std::strlen(name);
  const char* value = nullptr;
  for (int i = 0; i < c.entries_n; ++i) {
    const char* e = c.entries[i];
    if (std::strncmp(e, name, n) == 0 && e[n] == '=') {
      value = e + n + 1;
      break;
    }
  }
  if (c.memo_n < 16) c.memo[c.memo_n++] = {name, value};
  return value;
}

std::string lower(const char* v) {
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void bad(const char* name, const char* v, const std::string& accepts) {
  throw Error(std::string("[env] ") + name + "='" + v + "' is not valid: it accepts " + accepts +
              ". Fix or unset the variable.");
}

}  // namespace

Snapshot::Snapshot() {
  Cache& c = this_cache();
  if (c.pinned++ == 0) refresh(c);
}

Snapshot::~Snapshot() { --this_cache().pinned; }

uint64_t generation() {
  Cache& c = this_cache();
  if (!c.pinned) refresh(c);
  return c.generation;
}

bool flag(const char* name, bool dflt) {
  const char* v = lookup(name);
  if (!v || !*v) return dflt;
  std::string s = lower(v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  bad(name, v, "1 or 0 (also true/false, on/off, yes/no)");
}

int64_t integer(const char* name, int64_t dflt, int64_t lo, int64_t hi) {
  const char* v = lookup(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  errno = 0;
  long long r = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != 0 || r < lo || r > hi) {
    bad(name, v, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return r;
}

int choice(const char* name, int dflt, std::initializer_list<const char*> choices) {
  const char* v = lookup(name);
  if (!v || !*v) return dflt;
  std::string s = lower(v), accepts;
  int i = 0;
  for (const char* c : choices) {
    if (s == c) return i;
    accepts += (i == 0 ? "" : (i + 1 == static_cast<int>(choices.size()) ? " or " : ", "));
    accepts += c;
    ++i;
  }
  bad(name, v, accepts);
}

int debug_level() { return static_cast<int>(integer("LAZYX_DEBUG", 0, 0, 2)); }

int debug_level_nothrow() {
  try {
    return debug_level();
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace lazyx::env
