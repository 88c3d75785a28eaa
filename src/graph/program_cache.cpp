#include <cstdlib>
#include <list>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "graph/executor.h"
#include "graph/program.h"
#include "lazyx/debug.h"
#include "runtime/env.h"

namespace lazyx::graph {

namespace {

struct Lru {
  size_t capacity = static_cast<size_t>(env::integer("LAZYX_COMPILATION_CACHE_SIZE", 1024, 1, int64_t{1} << 30));
  std::list<std::pair<uint64_t, std::shared_ptr<CachedProgram>>> items;  // most recent first
  std::unordered_map<uint64_t, decltype(items)::iterator> index;
};

Lru& lru() {
  static Lru* l = new Lru();
  return *l;
}

}  // namespace

std::shared_ptr<CachedProgram> cache_lookup(uint64_t key) {
  Lru& c = lru();
  auto it = c.index.find(key);
  if (it == c.index.end()) return nullptr;
  c.items.splice(c.items.begin(), c.items, it->second);
  return it->second->second;
}

void cache_insert(uint64_t key, std::shared_ptr<CachedProgram> p) {
  Lru& c = lru();
  auto it = c.index.find(key);
  if (it != c.index.end()) {
    c.items.erase(it->second);
    c.index.erase(it);
  }
  c.items.emplace_front(key, std::move(p));
  c.index[key] = c.items.begin();
  while (c.items.size() > c.capacity) {
    c.index.erase(c.items.back().first);
    c.items.pop_back();
  }
}

}  // namespace lazyx::graph

namespace lazyx {

int64_t program_cache_size() {
  EngineLock lock(engine_mutex());
  return static_cast<int64_t>(graph::lru().items.size());
}

void clear_program_cache() {
  EngineLock lock(engine_mutex());
  graph::lru().items.clear();
  graph::lru().index.clear();
}

// Not under the engine lock: steps go on while the background compiler finishes.
void wait_for_background_compiles() {
  backend::active_backend("wait_for_background_compiles").wait_background();
}

}  // namespace lazyx
