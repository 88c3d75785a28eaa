// Entry file layout: "LAZYXK01", then three little-endian u64 (key length, object length,
// xxh3 of key and object), the key, the object. Names are the key's 128-bit xxh3 in hex.
#include "backends/cpu/persistent_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "lazyx/error.h"
#include "lazyx/metrics.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#include <llvm/Support/xxhash.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace fs = std::filesystem;

namespace lazyx::cpu {
namespace {

constexpr char kMagic[8] = {'L', 'A', 'Z', 'Y', 'X', 'K', '0', '1'};
constexpr size_t kHeader = 8 + 3 * 8;
constexpr const char* kSuffix = ".lzk";

struct DirState {
  bool scanned = false;
  int64_t bytes = 0;  // entries in the folder as of the last scan, plus what we wrote since
};

std::mutex& state_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}

std::map<std::string, DirState>& states() {
  static auto* s = new std::map<std::string, DirState>();
  return *s;
}

void warn_once(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr,
               "lazyx: warning: the compile cache cannot write (%s); kernels are compiled "
               "again in each process. Set LAZYX_CACHE_DIR to a writable folder, or to an empty "
               "value to turn the cache off.\n",
               what.c_str());
}

int64_t max_bytes() {
  const char* v = std::getenv("LAZYX_CACHE_MAX_MB");
  if (!v || !*v) return int64_t{1024} << 20;
  char* end = nullptr;
  double mb = std::strtod(v, &end);
  if (!end || *end != 0 || !(mb > 0) || mb > 1e9) {
    throw Error(std::string("[cache] LAZYX_CACHE_MAX_MB=") + v +
                " is not a positive number of megabytes; set it to e.g. 1024, or unset it.");
  }
  return static_cast<int64_t>(mb * 1048576.0);
}

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

uint64_t checksum(std::string_view key, std::string_view obj) {
  uint64_t a = llvm::xxh3_64bits(llvm::StringRef(key.data(), key.size()));
  uint64_t b = llvm::xxh3_64bits(llvm::StringRef(obj.data(), obj.size()));
  return a ^ (b * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

// Deletes the least recently used entries until the folder holds at most 80% of the cap, and
// temporary files a crashed writer left behind (older than an hour). Returns the bytes kept.
int64_t scan_and_evict(const fs::path& dir, int64_t cap, bool evict) {
  struct Entry {
    fs::file_time_type time;
    int64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code e2;
    auto t = fs::last_write_time(p, e2);
    if (e2) continue;
    const std::string name = p.filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      if (now - t > std::chrono::hours(1)) fs::remove(p, e2);
      continue;
    }
    if (p.extension() != kSuffix) continue;
    auto sz = fs::file_size(p, e2);
    if (e2) continue;
    entries.push_back({t, static_cast<int64_t>(sz), p});
    total += static_cast<int64_t>(sz);
  }
  if (!evict || total <= cap) return total;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  const int64_t goal = cap / 10 * 8;
  for (const Entry& e : entries) {
    if (total <= goal) break;
    std::error_code e2;
    fs::remove(e.path, e2);  // another process may have removed it already
    total -= e.bytes;
  }
  metrics::add_counter("PersistentCacheEvicted");
  return total;
}

}  // namespace

std::string persistent_cache_dir() {
  std::string dir;
  if (const char* v = std::getenv("LAZYX_CACHE_DIR")) {
    dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') {
    dir = std::string(x) + "/lazyx";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/lazyx";
  }
  if (dir.empty()) return dir;
  max_bytes();  // an invalid cap is an error even before anything is stored
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path(dir) / "cpu", ec);
  return ec ? (fs::path(dir) / "cpu").string() : abs.lexically_normal().string();
}

std::string persistent_cache_path(const std::string& dir, const std::string& key) {
  llvm::XXH128_hash_t h =
      llvm::xxh3_128bits(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
  char name[40];
  std::snprintf(name, sizeof(name), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return (fs::path(dir) / (std::string(name) + kSuffix)).string();
}

std::optional<std::string> persistent_cache_load(const std::string& dir, const std::string& key) {
  const std::string path = persistent_cache_path(dir, key);
  std::string data;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (f.bad()) return std::nullopt;
  }
  bool ok = data.size() >= kHeader && std::memcmp(data.data(), kMagic, 8) == 0;
  uint64_t klen = ok ? get_u64(data, 8) : 0, olen = ok ? get_u64(data, 16) : 0;
  ok = ok && klen == key.size() && olen > 0 && data.size() == kHeader + klen + olen;
  std::string_view k = ok ? std::string_view(data).substr(kHeader, klen) : std::string_view();
  std::string_view o = ok ? std::string_view(data).substr(kHeader + klen) : std::string_view();
  ok = ok && k == key && get_u64(data, 24) == checksum(k, o);
  if (!ok) {
    // Truncated, overwritten or (a 128-bit hash collision) another kernel's: drop it.
    std::error_code ec;
    fs::remove(path, ec);
    metrics::add_counter("PersistentCacheCorrupt");
    return std::nullopt;
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  return std::string(o);
}

void persistent_cache_store(const std::string& dir, const std::string& key, std::string_view obj) {
  const int64_t cap = max_bytes();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    warn_once("cannot create " + dir + ": " + ec.message());
    return;
  }
  const std::string path = persistent_cache_path(dir, key);
  static std::atomic<uint64_t> seq{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(seq.fetch_add(1));
  std::string head(kMagic, 8);
  put_u64(head, key.size());
  put_u64(head, obj.size());
  put_u64(head, checksum(key, obj));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(head.data(), static_cast<std::streamsize>(head.size()));
    f.write(key.data(), static_cast<std::streamsize>(key.size()));
    f.write(obj.data(), static_cast<std::streamsize>(obj.size()));
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      warn_once("cannot write " + tmp + ": " + std::strerror(errno));
      return;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: a concurrent writer of the same key wrote the same bytes
  if (ec) {
    fs::remove(tmp, ec);
    warn_once("cannot rename into " + path);
    return;
  }
  const int64_t bytes = static_cast<int64_t>(head.size() + key.size() + obj.size());
  std::lock_guard<std::mutex> lock(state_mu());
  DirState& st = states()[dir];
  if (!st.scanned) {
    st.bytes = scan_and_evict(dir, cap, true);
    st.scanned = true;
  } else {
    st.bytes += bytes;
    if (st.bytes > cap) st.bytes = scan_and_evict(dir, cap, true);
  }
}

}  // namespace lazyx::cpu
