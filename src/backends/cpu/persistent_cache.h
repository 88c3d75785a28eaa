// The persistent compile cache: compiled kernels kept as object files in a folder
// (LAZYX_CACHE_DIR, default $XDG_CACHE_HOME/lazyx or ~/.cache/lazyx), keyed by a hash of
// everything that decides their machine code, so a new process loads them instead of compiling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lazyx::cpu {

// The cache folder in use ("" when off: LAZYX_CACHE_DIR set to an empty value, or no home).
// Reads the environment on every call, so tests may switch it. Raises lazyx::Error on an
// invalid LAZYX_CACHE_MAX_MB.
std::string persistent_cache_dir();

// The object code stored under `key` (the full key text: build context and kernel IR), or
// nothing. A damaged entry (truncated, wrong checksum, another key) is deleted and reported as
// missing. A hit marks the entry as recently used. Safe to call from several threads.
std::optional<std::string> persistent_cache_load(const std::string& dir, const std::string& key);

// Stores `obj` under `key`: written to a temporary file and renamed into place, so readers
// (other processes too) see a whole entry or none. Then keeps the folder under
// LAZYX_CACHE_MAX_MB by deleting the least recently used entries. Failures to write warn once
// and are otherwise ignored: the kernel is compiled again next time.
void persistent_cache_store(const std::string& dir, const std::string& key, std::string_view obj);

// The entry file of `key` in `dir` (for tests and diagnostics).
std::string persistent_cache_path(const std::string& dir, const std::string& key);

}  // namespace lazyx::cpu
