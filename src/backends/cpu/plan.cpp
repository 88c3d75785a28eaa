// Planning for the cpu backend: fusion groups, a topological order that keeps every read of a
// donated buffer before its overwrite (rule 6 of ALIASING.md), arena offsets for intermediates,
// and which donated outputs are written in place.
#include "backends/cpu/plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <queue>
#include <set>
#include <string>

#include "backends/cpu/plan_chains.h"
#include "backends/cpu/plan_gemm.h"
#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"
#include "lazyx/error.h"
#include "runtime/env.h"

namespace lazyx::cpu {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;

int64_t value_bytes(const Instr& in) {
  return ir::shape_numel(in.shape) * static_cast<int64_t>(dtype_size(in.dtype));
}

namespace {

class ArenaPlanner {
 public:
  int64_t alloc(int64_t bytes) {
    bytes = (std::max<int64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= bytes) {
        int64_t off = it->first, size = it->second;
        free_.erase(it);
        if (size > bytes) free_[off + bytes] = size - bytes;
        return off;
      }
    }
    // Grow: reuse a free block at the end if there is one.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_) {
        int64_t off = last->first;
        free_.erase(last);
        end_ = off + bytes;
        return off;
      }
    }
    int64_t off = end_;
    end_ += bytes;
    return off;
  }
  void release(int64_t off, int64_t bytes) {
    bytes = (std::max<int64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    auto it = free_.emplace(off, bytes).first;
    auto nx = std::next(it);
    if (nx != free_.end() && it->first + it->second == nx->first) {
      it->second += nx->second;
      free_.erase(nx);
    }
    if (it != free_.begin()) {
      auto pv = std::prev(it);
      if (pv->first + pv->second == it->first) {
        pv->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t size() const { return end_; }

 private:
  std::map<int64_t, int64_t> free_;
  int64_t end_ = 0;
};

bool is_leaf(Op op) { return op == Op::Parameter || op == Op::Scalar; }

}  // namespace

std::unique_ptr<CpuProgram> plan(const LoweredGraph& g) {
  auto p = std::make_unique<CpuProgram>();
  p->g = g;
  const int32_t n = static_cast<int32_t>(g.instrs.size());
  const size_t nout = g.outputs.size();

  // Fusion groups, greedily in topological order. A node joins the group of one of its
  // operands when the shapes match and the unit graph stays acyclic (the group must not reach
  // the units of the node's other operands).
  std::vector<int32_t> unit_of(n, -1);
  using Unit = PlanUnit;
  std::vector<Unit> units;
  std::vector<std::set<int32_t>> usucc;
  auto reaches = [&](int32_t from, const std::set<int32_t>& targets) {
    if (targets.empty()) return false;
    std::vector<char> seen(units.size(), 0);
    std::vector<int32_t> stack{from};
    seen[from] = 1;
    while (!stack.empty()) {
      int32_t u = stack.back();
      stack.pop_back();
      for (int32_t v : usucc[u]) {
        if (targets.count(v)) return true;
        if (!seen[v]) {
          seen[v] = 1;
          stack.push_back(v);
        }
      }
    }
    return false;
  };
  // AsStridedScatter members: their value is not at the loop index, so nothing in their group
  // reads them.
  std::vector<char> is_scatter(n, 0);
  auto reads_scatter_of = [&](const Instr& in, int32_t G) {
    for (int32_t c : in.inputs) if (is_scatter[c] && unit_of[c] == G) return true;
    return false;
  };
  // Whether `from` reaches `to` through some unit other than `to` itself.
  auto reaches_indirectly = [&](int32_t from, int32_t to) {
    std::vector<char> seen(units.size(), 0);
    std::vector<int32_t> stack;
    for (int32_t v : usucc[from]) {
      if (v != to) stack.push_back(v);
    }
    while (!stack.empty()) {
      int32_t u = stack.back();
      stack.pop_back();
      if (u == to) return true;
      if (seen[u]) continue;
      seen[u] = 1;
      for (int32_t v : usucc[u]) stack.push_back(v);
    }
    return false;
  };
  // A plain loop: same-index reads only, so it can merge with another of its shape.
  auto plain = [&](int32_t G) {
    return G >= 0 && units[G].fused && units[G].reduce < 0 && !units[G].has_scatter &&
           !units[G].members.empty();
  };
  // Node i joins group C; the groups of its other operands of the same shape merge into C too
  // when no path between them passes through a third unit (horizontal fusion: Adam's moments and
  // its update then run in one loop, and nothing in between is stored).
  auto merge_operand_groups = [&](int32_t i, int32_t C) {
    const Instr& in = g.instrs[i];
    if (!plain(C)) return;
    for (int32_t c : in.inputs) {
      int32_t G2 = unit_of[c];
      if (G2 == C || !plain(G2) || units[G2].shape != units[C].shape) continue;
      if (units[C].members.size() + units[G2].members.size() > kMaxFusedOps) continue;
      std::set<int32_t> rest;
      for (int32_t c2 : in.inputs) {
        int32_t u = unit_of[c2];
        if (u >= 0 && u != C && u != G2) rest.insert(u);
      }
      if (reaches_indirectly(G2, C) || reaches(G2, rest)) continue;
      // A view reads its operand's storage, so its operand must not be computed in its loop.
      bool view_conflict = false;
      for (int32_t a : {C, G2}) {
        for (int32_t m : units[a].members) {
          const Instr& mi = g.instrs[m];
          int32_t other = a == C ? G2 : C;
          if (mi.op == Op::AsStrided && unit_of[mi.inputs[0]] == other) view_conflict = true;
        }
      }
      if (view_conflict) continue;
      for (int32_t m : units[G2].members) unit_of[m] = C;
      auto& cm = units[C].members;
      cm.insert(cm.end(), units[G2].members.begin(), units[G2].members.end());
      std::sort(cm.begin(), cm.end());
      units[C].has_arange = units[C].has_arange || units[G2].has_arange;
      units[G2].members.clear();
      units[G2].fused = false;
      for (int32_t v : usucc[G2]) {
        if (v != C) usucc[C].insert(v);
      }
      usucc[G2].clear();
      for (auto& su : usucc) {
        if (su.erase(G2)) su.insert(C);
      }
      usucc[C].erase(C);
    }
  };
  for (int32_t i = 0; i < n; ++i) {
    const Instr& in = g.instrs[i];
    if (is_leaf(in.op)) continue;
    int32_t chosen = -1;
    if (scatter_fusable(g, i)) {
      // The strided store of its operand 1's loop, or a loop of its own over operand 1.
      int32_t src = in.inputs[1], base = in.inputs[0];
      int32_t G = unit_of[src];
      std::set<int32_t> others;
      if (unit_of[base] >= 0 && unit_of[base] != G) others.insert(unit_of[base]);
      if (G >= 0 && units[G].fused && units[G].reduce < 0 && unit_of[base] != G &&
          units[G].shape == g.instrs[src].shape && units[G].members.size() < kMaxFusedOps &&
          !reaches(G, others)) {
        chosen = G;
      } else {
        chosen = static_cast<int32_t>(units.size());
        units.push_back({});
        usucc.emplace_back();
        units[chosen].fused = true;
        units[chosen].shape = g.instrs[src].shape;
      }
      units[chosen].has_scatter = true;
      is_scatter[i] = 1;
    }
    if (chosen < 0 && fusable(g, i) && in.op != Op::AsStrided) {
      for (int32_t c : in.inputs) {
        int32_t G = unit_of[c];
        if (G < 0 || !units[G].fused || units[G].shape != in.shape || units[G].reduce >= 0 ||
            units[G].members.size() >= kMaxFusedOps)
          continue;
        if (reads_scatter_of(in, G)) continue;
        std::set<int32_t> others;
        for (int32_t c2 : in.inputs) {
          if (unit_of[c2] >= 0 && unit_of[c2] != G) others.insert(unit_of[c2]);
        }
        if (!reaches(G, others)) {
          chosen = G;
          break;
        }
      }
      if (chosen >= 0) merge_operand_groups(i, chosen);
    }
    bool reduce = false;
    if (chosen < 0 && reduction_fusable(g, i)) {
      // A reduction joins the group of its input (a prologue), or starts its own loop.
      int32_t x = in.inputs[0];
      int32_t G = unit_of[x];
      reduce = true;
      bool mergeable = false;
      if (G >= 0 && units[G].fused && units[G].shape == g.instrs[x].shape && units[G].reduce < 0 &&
          !units[G].has_arange && !units[G].has_scatter && !is_scatter[x] &&
          units[G].members.size() < kMaxFusedOps) {
        std::vector<Shape> strides{ir::contiguous_strides(units[G].shape)};
        for (int32_t m : units[G].members) {
          if (g.instrs[m].op == Op::AsStrided) {
            strides.push_back(g.instrs[m].attrs.ints);
            continue;
          }
          for (int32_t c : g.instrs[m].inputs) {
            if (unit_of[c] != G && g.instrs[c].op != Op::Scalar) {
              strides.push_back(broadcast_strides(g.instrs[c].shape, units[G].shape));
            }
          }
        }
        mergeable = reduction_mergeable(g, i, units[G].shape, strides);
      }
      if (mergeable) {
        chosen = G;
      } else {
        chosen = static_cast<int32_t>(units.size());
        units.push_back({});
        usucc.emplace_back();
        units[chosen].fused = true;
        units[chosen].shape = g.instrs[x].shape;
      }
      units[chosen].reduce = i;
    }
    if (chosen < 0) {
      chosen = static_cast<int32_t>(units.size());
      units.push_back({});
      usucc.emplace_back();
      units[chosen].fused = fusable(g, i);
      units[chosen].shape = in.shape;
    }
    if (in.op == Op::Arange || in.op == Op::RandUniform || in.op == Op::RandNormal ||
        in.op == Op::RandInt) {
      units[chosen].has_arange = true;  // reads the linear index
    }
    (void)reduce;
    unit_of[i] = chosen;
    units[chosen].members.push_back(i);
    for (int32_t c : in.inputs) {
      if (unit_of[c] >= 0 && unit_of[c] != chosen) usucc[unit_of[c]].insert(chosen);
    }
  }
  {  // Drop the groups merged into others.
    std::vector<int32_t> renum(units.size(), -1);
    std::vector<Unit> kept;
    for (size_t u = 0; u < units.size(); ++u) {
      if (units[u].members.empty()) continue;
      renum[u] = static_cast<int32_t>(kept.size());
      kept.push_back(std::move(units[u]));
    }
    units = std::move(kept);
    for (int32_t i = 0; i < n; ++i) {
      if (unit_of[i] >= 0) unit_of[i] = renum[unit_of[i]];
    }
  }
  const int32_t nunits = static_cast<int32_t>(units.size());
  std::vector<int32_t> group(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    if (unit_of[i] >= 0 && units[unit_of[i]].fused) group[i] = unit_of[i];
  }
  auto group_shape = [&](int32_t u) -> const Shape& { return units[u].shape; };

  std::vector<std::vector<int32_t>> output_indices(n);
  for (size_t o = 0; o < nout; ++o) output_indices[g.outputs[o]].push_back(static_cast<int32_t>(o));
  std::vector<int32_t> donor_of_output(nout, -1);
  for (size_t s = 0; s < g.donation.size(); ++s) {
    if (g.donation[s] >= 0) donor_of_output[g.donation[s]] = static_cast<int32_t>(s);
  }

  // Matmul operands that sgemm reads through their view, straight from the view's operand.
  std::vector<std::vector<GemmOperand>> gemm_ops(n);
  const bool gemm_views = !env::flag("LAZYX_CPU_NO_VIEW_FUSION", false) &&
                          !env::flag("LAZYX_CPU_NO_GEMM_VIEWS", false);
  for (int32_t i = 0; i < n && gemm_views; ++i) {
    const Instr& in = g.instrs[i];
    if (in.op != Op::Matmul || in.dtype != kFloat32 || in.shape.size() < 2) continue;
    const Instr &x0 = g.instrs[in.inputs[0]], &x1 = g.instrs[in.inputs[1]];
    if (x0.shape.size() < 2 || x1.shape.size() < 2 || x0.dtype != kFloat32 ||
        x1.dtype != kFloat32) {
      continue;
    }
    std::vector<GemmOperand> ops(2);
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      const Instr& x = k == 0 ? x0 : x1;
      if (gemm_view(g, in.inputs[k], in.shape, ops[k])) {
        any = true;
      } else {
        ops[k] = {in.inputs[k], 0, -1, 'N',
                  gemm_batch_strides(x.shape, ir::contiguous_strides(x.shape), in.shape)};
      }
    }
    if (any) gemm_ops[i] = ops;
  }
  // Unit order: trace order, which keeps intermediates as short-lived as in the eager program,
  // plus edges that put every other read of a donated buffer, and every unit that can fail,
  // before the unit that overwrites the buffer, unless that unit's result is needed first (the
  // output then goes to a temporary: rule 6 of ALIASING.md).
  std::vector<std::set<int32_t>> succ(nunits);
  for (int32_t u = 0; u < nunits; ++u) {
    for (int32_t m : units[u].members) {
      for (int32_t c : g.instrs[m].inputs) {
        int32_t cu = unit_of[c];
        if (cu >= 0 && cu != u) succ[cu].insert(u);
      }
    }
  }
  auto path = [&](int32_t from, int32_t to) {
    std::vector<char> seen(nunits, 0);
    std::vector<int32_t> stack{from};
    while (!stack.empty()) {
      int32_t u = stack.back();
      stack.pop_back();
      if (u == to) return true;
      if (seen[u]) continue;
      seen[u] = 1;
      for (int32_t v : succ[u]) stack.push_back(v);
    }
    return false;
  };
  std::map<int32_t, std::set<int32_t>> readers;  // parameter instruction -> units that read it
  std::vector<int32_t> failing;
  for (int32_t u = 0; u < nunits; ++u) {
    bool fails = false;
    for (int32_t m : units[u].members) {
      const Instr& mi = g.instrs[m];
      if (ir::op_info(mi.op).can_fail && !reference::index_operands(mi).empty()) {
        // Checked right after its indices are computed (a Check step): those units go first.
        for (int32_t q : reference::index_operands(mi)) {
          if (unit_of[mi.inputs[q]] >= 0) failing.push_back(unit_of[mi.inputs[q]]);
        }
      } else {
        fails = fails || ir::op_info(mi.op).can_fail;
      }
      for (int32_t c : mi.inputs) {
        if (g.instrs[c].op == Op::Parameter) readers[c].insert(u);
      }
      for (const GemmOperand& op : gemm_ops[m]) {
        if (g.instrs[op.instr].op == Op::Parameter) readers[op.instr].insert(u);
      }
    }
    if (fails) failing.push_back(u);
  }
  // Units in `before` go before u where no path leads from u to them. Edges into u leave what u
  // reaches unchanged, so one search serves them all.
  auto order_before = [&](int32_t u, const std::vector<int32_t>& before) {
    std::vector<char> seen(nunits, 0);
    std::vector<int32_t> stack{u};
    while (!stack.empty()) {
      int32_t v = stack.back();
      stack.pop_back();
      if (seen[v]) continue;
      seen[v] = 1;
      for (int32_t w : succ[v]) stack.push_back(w);
    }
    for (int32_t r : before) {
      if (r >= 0 && !seen[r]) succ[r].insert(u);
    }
  };
  // Each link of a donated output's chain (plan_chains.h), then the output itself, after the
  // other reads of the version it overwrites.
  const std::vector<std::vector<int32_t>> chains = donated_chains(g, donor_of_output);
  const std::vector<std::vector<int32_t>> sreaders = storage_readers(g, gemm_ops);
  for (size_t o = 0; o < nout; ++o) {
    int32_t x = g.outputs[o], donor = donor_of_output[o];
    if (donor < 0 || is_leaf(g.instrs[x].op)) continue;
    int32_t prev = g.param_instr[donor];
    std::vector<int32_t> before(failing);
    for (int32_t r : readers[prev]) before.push_back(r);
    for (int32_t y : chains[o]) {
      std::vector<int32_t> b(failing);
      for (int32_t r : sreaders[prev]) b.push_back(unit_of[r]);
      order_before(unit_of[y], b);
      prev = y;
    }
    for (int32_t r : sreaders[prev]) before.push_back(unit_of[r]);
    order_before(unit_of[x], before);
  }
  // Accumulating epilogues: a float32 matmul whose one reader is c = y + t, y - t or t - y in a
  // loop, t the product or the product times a Scalar, and c overwrites the donated buffer of
  // the parameter y in place. The GEMM then computes c itself with the library's alpha and beta
  // (a gradient added to a kept grad, an SGD step on a weight): no block for the product and no
  // second pass over it. Every other read of y is put before the GEMM where the order allows.
  std::vector<int32_t> consumer(n, -1), nuses(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t c : g.instrs[r].inputs) {
      if (consumer[c] != r) nuses[c]++;
      consumer[c] = r;
    }
  }
  std::vector<Accum> accums;
  const bool epilogues = !env::flag("LAZYX_CPU_NO_GEMM_EPILOGUE", false);
  for (int32_t m = 0; m < n && epilogues; ++m) {
    Accum a;
    if (unit_of[m] >= 0 && accum_candidate(g, m, consumer, nuses, group, output_indices, a)) {
      const auto& outs = output_indices[a.c];
      if (outs.empty() || donor_of_output[outs[0]] < 0 ||
          g.param_instr[donor_of_output[outs[0]]] != a.y) {
        continue;
      }
      bool alone = true;  // the loop reads y only through c, and the matmul does not read it
      for (int32_t w : units[group[a.c]].members) {
        for (int32_t x : g.instrs[w].inputs) alone = alone && (w == a.c || x != a.y);
      }
      for (int32_t x : g.instrs[m].inputs) alone = alone && x != a.y;
      for (const GemmOperand& op : gemm_ops[m]) alone = alone && op.instr != a.y;
      if (!alone) continue;
      accums.push_back(a);
      int32_t um = unit_of[m], uc = group[a.c];
      std::vector<int32_t> before(failing);
      for (int32_t r : readers[a.y]) before.push_back(r);
      for (int32_t r : before) {
        if (r != uc && r != um && !path(um, r)) succ[r].insert(um);
      }
    }
  }
  std::vector<int32_t> indeg(nunits, 0);
  for (int32_t u = 0; u < nunits; ++u) {
    for (int32_t v : succ[u]) indeg[v]++;
  }
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> ready;  // first member
  for (int32_t u = 0; u < nunits; ++u) {
    if (indeg[u] == 0) ready.push(units[u].members.front());
  }
  std::vector<int32_t> order, pos(nunits, -1);
  while (!ready.empty()) {
    int32_t u = unit_of[ready.top()];
    ready.pop();
    pos[u] = static_cast<int32_t>(order.size());
    order.push_back(u);
    for (int32_t v : succ[u]) {
      if (--indeg[v] == 0) ready.push(units[v].members.front());
    }
  }
  if (static_cast<int32_t>(order.size()) != nunits) {
    ir::fail("cpu", "internal: the fusion plan has a cycle.");
  }
  const int32_t kEnd = nunits;  // position of the final copies

  // Which values need storage, and where each is last read.
  std::vector<char> needs(n, 0);
  std::vector<int32_t> last_use(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    int32_t u = unit_of[i];
    if (u >= 0 && !gemm_ops[i].empty()) {
      for (const GemmOperand& op : gemm_ops[i]) {
        last_use[op.instr] = std::max(last_use[op.instr], pos[u]);
        needs[op.instr] = 1;
      }
      continue;
    }
    for (int32_t c : g.instrs[i].inputs) {
      if (u < 0) continue;
      last_use[c] = std::max(last_use[c], pos[u]);
      if (!units[u].fused || group[c] != u) needs[c] = 1;
    }
    if (u >= 0 && units[u].reduce == i) needs[i] = 1;
  }
  for (size_t o = 0; o < nout; ++o) needs[g.outputs[o]] = 1;
  // Fused loops whose values nobody reads (views only sgemm reads) do not run.
  std::vector<char> skipped(nunits, 0);
  for (int32_t u = 0; u < nunits; ++u) {
    if (!units[u].fused || units[u].reduce >= 0) continue;
    bool any = false;
    for (int32_t m : units[u].members) any = any || needs[m];
    skipped[u] = !any;
  }
  for (size_t o = 0; o < nout; ++o) last_use[g.outputs[o]] = kEnd;
  // Donated writes wait for every op that can fail (last_failing > pos: not yet). An index op's
  // indices are checked before the unit at check position `cp`, right after the last of them.
  int32_t last_failing = -1;
  std::vector<std::vector<int32_t>> checks_at(nunits + 1);
  for (int32_t u = 0; u < nunits; ++u) {
    for (int32_t m : units[u].members) {
      const Instr& mi = g.instrs[m];
      if (!ir::op_info(mi.op).can_fail) continue;
      const std::vector<int32_t> ix = reference::index_operands(mi);
      if (ix.empty()) {
        last_failing = std::max(last_failing, pos[u]);
        continue;
      }
      int32_t cp = 0;
      for (int32_t q : ix) {
        if (unit_of[mi.inputs[q]] >= 0) cp = std::max(cp, pos[unit_of[mi.inputs[q]]] + 1);
      }
      checks_at[cp].push_back(m);
      last_failing = std::max(last_failing, cp);
    }
  }

  // Locations of leaves and outputs.
  p->loc.assign(n, {});
  p->temp_loc.assign(nout, {});
  p->fresh_output.assign(nout, 0);
  std::vector<int32_t> storage_key(n);  // instruction whose storage a value occupies
  for (int32_t i = 0; i < n; ++i) storage_key[i] = i;
  for (int32_t i = 0; i < n; ++i) {
    const Instr& in = g.instrs[i];
    if (in.op == Op::Parameter) p->loc[i] = {LocKind::Param, in.slot};
    if (in.op == Op::Scalar) p->loc[i] = {LocKind::Scalar, i};
  }
  std::vector<char> temp_needed(nout, 0);
  std::vector<int32_t> chain_out(n, -1);      // chain links in a donated buffer: its output
  std::vector<int32_t> occupant_of(nout, -1);  // what a donated buffer holds before its output
  const InPlaceContext ctx{g,     units,    unit_of,  pos,         is_scatter,
                           skipped, needs, gemm_ops, sreaders, last_failing};
  for (int32_t x = 0; x < n; ++x) {
    const auto& outs = output_indices[x];
    if (outs.empty()) continue;
    int32_t o = outs[0];
    for (size_t k = 1; k < outs.size(); ++k) p->dup_copies.push_back({x, outs[k]});
    const Instr& in = g.instrs[x];
    if (is_leaf(in.op)) {
      p->leaf_copies.push_back({x, o});
      if (donor_of_output[o] < 0) p->fresh_output[o] = 1;
      continue;
    }
    int32_t donor = donor_of_output[o];
    if (donor < 0) {
      p->loc[x] = {LocKind::Output, o};
      p->fresh_output[o] = 1;
      continue;
    }
    // A donated output and the links of its chain: each written in place only when every other
    // read of the version it overwrites comes first and every op that can fail has run (rule 6).
    int32_t pi = g.param_instr[donor];
    // Parameters copied to other outputs at the end are read last.
    bool read_at_end = false;
    for (const auto& lc : p->leaf_copies) read_at_end = read_at_end || lc.src_instr == pi;
    for (size_t o2 = 0; o2 < nout; ++o2) {
      read_at_end = read_at_end || (g.outputs[o2] == pi && static_cast<int32_t>(o2) != o);
    }
    int32_t occ = pi;
    if (!read_at_end) {
      occ = place_chain(ctx, chains[o], o, pi, p->loc, storage_key, chain_out, p->why_scratch);
    }
    occupant_of[o] = occ;
    Overwrite w = read_at_end ? Overwrite::ReadAfter : may_overwrite(ctx, occ, x);
    if (w == Overwrite::Ok) {
      p->loc[x] = {LocKind::Output, o};
      storage_key[x] = pi;
    } else {
      temp_needed[o] = 1;
      p->deferred.push_back(o);
      if (p->why_scratch.empty()) p->why_scratch = copy_reason(in, "output", o, w);
    }
  }

  // A matmul whose only reader is an elementwise loop of its shape writes straight into the
  // storage of a value that loop stores and computes from it (an output, the donated buffer it
  // overwrites, or an arena block): the loop reads each element before it writes it, and the
  // matmul needs no block of its own (a gradient accumulated onto a zeroed grad, bias + relu).
  std::vector<int32_t> fwd(n, -1);  // matmul -> the value whose storage it writes
  std::vector<char> taken(n, 0);    // values a matmul writes
  std::vector<char> absorbed(n, 0);  // loop members an accumulating GEMM computes
  std::vector<const Accum*> accum_of(n, nullptr);
  for (const Accum& a : accums) {
    // Rule 6 at the GEMM's position: it overwrites y there, not in c's loop.
    int32_t um = unit_of[a.m], uc = group[a.c];
    bool ok = storage_key[a.c] == a.y && last_failing < pos[um] && !skipped[uc] &&
              occupant_of[output_indices[a.c][0]] == a.y;
    for (int32_t r : readers[a.y]) ok = ok && (r == uc || skipped[r] || pos[r] < pos[um]);
    if (!ok) continue;
    fwd[a.m] = a.c;
    taken[a.c] = absorbed[a.c] = 1;
    if (a.t != a.m) absorbed[a.t] = 1;
    accum_of[a.m] = &a;
    storage_key[a.m] = storage_key[a.c];
    p->loc[a.m] = p->loc[a.c];
  }
  {
    std::vector<char> dep(n, 0);
    auto target_ok = [&](int32_t w, int32_t m, int32_t u) {
      const Instr& wi = g.instrs[w];
      const Instr& mi = g.instrs[m];
      if (!needs[w] || taken[w] || is_scatter[w] || units[u].reduce == w ||
          wi.op == Op::AsStrided || wi.shape != mi.shape ||
          dtype_size(wi.dtype) != dtype_size(mi.dtype) || chain_out[w] >= 0) {
        return false;
      }
      const auto& outs = output_indices[w];
      if (outs.empty()) return true;
      if (temp_needed[outs[0]]) return false;
      if (storage_key[w] == w) return true;
      if (occupant_of[outs[0]] != storage_key[w]) return false;  // holds a chain link meanwhile
      // In place in a donated buffer, which the matmul now writes at its own position: every
      // other read of the donor and every unit that can fail must come before it.
      int32_t pi = storage_key[w], um = unit_of[m];
      bool ok = last_failing < pos[um];
      for (int32_t r : readers[pi]) ok = ok && (skipped[r] || pos[r] < pos[um]);
      return ok;
    };
    for (int32_t m = 0; m < n; ++m) {
      const Instr& mi = g.instrs[m];
      int32_t c = consumer[m];
      if (mi.op != Op::Matmul || nuses[m] != 1 || !output_indices[m].empty() || unit_of[m] < 0 ||
          fwd[m] >= 0) {
        continue;
      }
      int32_t u = group[c];
      if (u < 0 || skipped[u] || group_shape(u) != mi.shape || g.instrs[c].op == Op::AsStrided ||
          is_scatter[c]) {
        continue;
      }
      int32_t red = units[u].reduce;
      if (red >= 0 && !splittable(g.instrs[red].op)) continue;  // multi-pass: reads m again
      // Members computed from c (members are in topological order); one of them takes m's place.
      for (int32_t w : units[u].members) dep[w] = 0;
      int32_t target = -1;
      for (int32_t w : units[u].members) {
        dep[w] = w == c;
        for (int32_t x : g.instrs[w].inputs) dep[w] = dep[w] || (group[x] == u && dep[x]);
        if (dep[w] && target < 0 && target_ok(w, m, u)) target = w;
      }
      if (target < 0) continue;
      fwd[m] = target;
      taken[target] = 1;  // one matmul per value: a second would overwrite the first
      storage_key[m] = storage_key[target];
      p->loc[m] = p->loc[target];  // outputs; arena blocks are set by the scan below
    }
  }

  // Arena offsets by a linear scan over unit positions.
  ArenaPlanner arena;
  std::vector<std::vector<int32_t>> free_at(nunits + 1);
  for (int32_t step = 0; step < nunits; ++step) {
    int32_t u = order[step];
    for (int32_t m : units[u].members) {
      if (!needs[m] || skipped[u]) continue;
      const auto& outs = output_indices[m];
      if (!outs.empty() && !temp_needed[outs[0]]) continue;  // in an output buffer
      if (p->loc[m].kind == LocKind::Output) continue;  // a chain link, or a matmul into one
      if (p->loc[m].kind == LocKind::Arena) continue;  // a block its matmul already took
      int32_t owner = fwd[m] >= 0 ? fwd[m] : m;  // the block lives as long as its owner
      int64_t off = arena.alloc(value_bytes(g.instrs[m]));
      if (owner != m) {
        p->loc[m] = p->loc[owner] = {LocKind::Arena, off};
        free_at[std::max(last_use[owner], step)].push_back(owner);
        continue;
      }
      if (!outs.empty()) {
        p->loc[m] = {LocKind::Arena, off};
        p->temp_loc[outs[0]] = {LocKind::Arena, off};
        continue;  // lives to the end
      }
      p->loc[m] = {LocKind::Arena, off};
      free_at[std::max(last_use[m], step)].push_back(m);
    }
    for (int32_t m : free_at[step]) arena.release(p->loc[m].v, value_bytes(g.instrs[m]));
  }
  p->arena_bytes = arena.size();

  // Steps and fused loop specs.
  auto add_checks = [&](int32_t step) {
    for (int32_t m : checks_at[step]) {
      Step c;
      c.kind = StepKind::Check;
      c.instr = m;
      c.numel = 1;
      p->steps.push_back(std::move(c));
    }
  };
  for (int32_t step = 0; step < nunits; ++step) {
    add_checks(step);
    int32_t u = order[step];
    const Unit& U = units[u];
    Step s;
    if (skipped[u]) continue;
    if (!U.fused) {
      s.instr = U.members[0];
      s.kind = g.instrs[s.instr].op == Op::Matmul ? StepKind::Matmul : StepKind::Ref;
      s.numel = ir::shape_numel(g.instrs[s.instr].shape);
      s.gemm = gemm_ops[s.instr];
      if (const Accum* a = accum_of[s.instr]) {
        s.alpha = a->alpha;
        s.beta = a->beta;
        s.alpha_scalar = a->scale;
      }
      p->steps.push_back(std::move(s));
      continue;
    }
    FusedSpec spec;
    spec.shape = group_shape(u);
    std::map<int32_t, int32_t> arg_of_key;
    auto arg_for = [&](int32_t instr) {
      int32_t key = storage_key[instr];
      auto [it, inserted] = arg_of_key.emplace(key, static_cast<int32_t>(s.arg_instr.size()));
      if (inserted) s.arg_instr.push_back(instr);
      return it->second;
    };
    std::set<int32_t> seen;
    for (int32_t m : U.members) {
      if (absorbed[m]) continue;  // computed by its GEMM; read below as an input
      if (g.instrs[m].op == Op::AsStrided) {
        // A strided read of the operand's storage (or of a scalar) in place of the view.
        int32_t x = g.instrs[m].inputs[0];
        FusedSpec::Input inp;
        inp.instr = m;
        inp.src = x;
        if (g.instrs[x].op != Op::Scalar) {
          inp.arg = arg_for(x);
          inp.strides = g.instrs[m].attrs.ints;
          inp.offset = g.instrs[m].attrs.i0;
        }
        spec.inputs.push_back(inp);
        continue;
      }
      if (is_scatter[m] && needs[m]) s.pre_copies.push_back({m, g.instrs[m].inputs[0]});
      const auto& ins = g.instrs[m].inputs;
      // A scatter's loop reads only its operand 1; its base is copied before the loop.
      for (size_t ci = is_scatter[m] ? 1 : 0; ci < ins.size(); ++ci) {
        int32_t c = ins[ci];
        if ((group[c] == u && !absorbed[c]) || !seen.insert(c).second) continue;
        FusedSpec::Input inp;
        inp.instr = c;
        if (g.instrs[c].op != Op::Scalar) {
          inp.arg = arg_for(c);
          inp.strides = broadcast_strides(g.instrs[c].shape, spec.shape);
        }
        spec.inputs.push_back(inp);
      }
    }
    for (int32_t m : U.members) {
      if (!absorbed[m]) spec.members.push_back(m);
    }
    for (int32_t m : U.members) {
      if (!needs[m] || absorbed[m]) continue;
      FusedSpec::Output out;
      out.instr = m;
      out.arg = arg_for(m);
      if (is_scatter[m]) {
        out.scatter = true;
        out.strides = g.instrs[m].attrs.ints;
        out.offset = g.instrs[m].attrs.i0;
      }
      spec.outputs.push_back(out);
    }
    if (spec.outputs.empty()) continue;  // every value it stores came from accumulating GEMMs
    spec.num_args = static_cast<int32_t>(s.arg_instr.size());
    s.kind = StepKind::Fused;
    s.spec = static_cast<int32_t>(p->specs.size());
    s.numel = ir::shape_numel(spec.shape);
    if (U.reduce >= 0) {
      spec.reduce_instr = U.reduce;
      for (const auto& o : spec.outputs) if (o.instr == U.reduce) spec.reduce_arg = o.arg;
      reduce_extent(g, spec, s.numel, s.inner);
      s.reduce = U.reduce;
      s.split = splittable(g.instrs[U.reduce].op);
    }
    p->specs.push_back(std::move(spec));
    p->steps.push_back(std::move(s));
  }
  add_checks(nunits);
  if (env::flag("LAZYX_CPU_DUMP_PLAN", false)) {
    std::string out = "[cpu plan]";
    for (const Step& s : p->steps) {
      if (s.kind == StepKind::Check) {
        out += std::string(" check(") + ir::op_name(g.instrs[s.instr].op) + ")";
      } else if (s.kind == StepKind::Fused) {
        out += " loop(";
        for (int32_t m : p->specs[s.spec].members) {
          out += std::string(ir::op_name(g.instrs[m].op)) + " ";
        }
        out.back() = ')';
      } else {
        std::string into = fwd[s.instr] < 0 ? "" : ir::op_name(g.instrs[fwd[s.instr]].op);
        out += std::string(s.kind == StepKind::Matmul ? " gemm" : " ref") + "(" +
               ir::op_name(g.instrs[s.instr].op) + (s.gemm.empty() ? "" : " views") +
               (into.empty() ? "" : (s.beta != 0 ? " +=" : " ->") + into) + ")";
      }
    }
    out += " arena " + std::to_string(p->arena_bytes) + " B";
    for (int32_t o : p->deferred) out += " deferred(" + std::to_string(o) + ")";
    std::fprintf(stderr, "%s\n", out.c_str());
  }
  return p;
}
}  // namespace lazyx::cpu
