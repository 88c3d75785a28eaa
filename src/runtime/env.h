// LAZYX_* environment variables, read through one parser: a value that does not parse raises
// lazyx::Error naming the variable and what it accepts, never falls back silently.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace lazyx::env {

// While one lives on this thread, LAZYX_* reads skip checking whether the environment changed
// (it is checked once, here): a sync holds one, so a change between steps still takes effect.
class Snapshot {
 public:
  Snapshot();
  ~Snapshot();
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
};

// Names must be string literals: answers are remembered by the name's address.
// A switch: 1/0, true/false, on/off, yes/no (any case). Unset or empty gives `dflt`.
bool flag(const char* name, bool dflt);
// A decimal integer in [lo, hi]. Unset or empty gives `dflt`.
int64_t integer(const char* name, int64_t dflt, int64_t lo, int64_t hi);
// One of `choices` (any case): its index. Unset or empty gives `dflt`.
int choice(const char* name, int dflt, std::initializer_list<const char*> choices);
// Changes whenever the calling thread sees a changed environment, and differs between threads:
// values derived from LAZYX_* variables can be kept while it stays the same (a compare).
uint64_t generation();
// LAZYX_DEBUG: 0 (quiet), 1 (step reports), 2 (also LLVM's remarks).
int debug_level();
// The same, for callbacks that must not throw (an invalid value reads as 0).
int debug_level_nothrow();

}  // namespace lazyx::env
