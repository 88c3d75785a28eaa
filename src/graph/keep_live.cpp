// What a partial sync computes, it keeps: live pending tensors inside the graph of what a value
// read or sync(tensors) needs become outputs of the same program, so the next read starts from
// their values instead of re-running (and recompiling) a longer history.
#include <algorithm>
#include <unordered_set>

#include "graph/executor.h"
#include "runtime/env.h"

namespace lazyx::graph {

std::vector<int64_t> add_kept_live(SyncKind kind, std::vector<Storage*>& targets) {
  std::vector<int64_t> kept;
  // Read first, so an invalid value raises before the sync changes anything.
  if (!env::flag("LAZYX_KEEP_LIVE", true) || kind == SyncKind::MarkStep || targets.empty()) {
    return kept;
  }
  std::unordered_set<const ir::Node*> seen;
  std::vector<const ir::Node*> stack;
  for (Storage* s : targets) stack.push_back(s->pending_node().get());
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (n->op() == ir::Op::Parameter || !seen.insert(n).second) continue;
    for (const auto& o : n->operands()) stack.push_back(o.get());
  }
  // Live (a handle or a view holds the storage) and cheap: the program computes the value anyway,
  // so keeping it costs one output buffer, which its own sync would allocate later.
  const size_t asked = targets.size();
  for (Storage* s = Storage::first_live(); s; s = s->next_live()) {
    if (!s->pending() || !seen.count(s->pending_node().get())) continue;
    if (std::find(targets.begin(), targets.begin() + asked, s) != targets.begin() + asked) continue;
    targets.push_back(s);
    kept.push_back(s->id());
  }
  if (!kept.empty()) {
    std::sort(targets.begin(), targets.end(),
              [](Storage* a, Storage* b) { return a->id() < b->id(); });
  }
  return kept;
}

}  // namespace lazyx::graph
