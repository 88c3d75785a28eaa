// Chains of in-place updates of a donated tensor on the cpu backend: each version between the
// donor and the donated output is written over the one before it, in the donated buffer, when
// nothing reads that version afterwards (rule 6 of ALIASING.md), as the reference backend does.
#include "backends/cpu/plan_chains.h"

#include <algorithm>
#include <utility>

#include "backends/cpu/codegen.h"
#include "ir/shape_infer.h"

namespace lazyx::cpu {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;

Shape broadcast_strides(const Shape& s, const Shape& out) {
  Shape st(out.size(), 0);
  Shape cs = ir::contiguous_strides(s);
  size_t lead = out.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] != 1 || out[d + lead] == 1) st[d + lead] = s[d] == 1 ? 0 : cs[d];
  }
  return st;
}

namespace {

// A view that reads its operand exactly as it is laid out: rule 6 allows it to read a donated
// buffer that the same loop writes.
bool view_is_identity(const Instr& v, const Instr& src) {
  if (v.attrs.i0 != 0 || ir::shape_numel(v.shape) != ir::shape_numel(src.shape)) return false;
  Shape cs = ir::contiguous_strides(v.shape);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] != 1 && v.attrs.ints[d] != cs[d]) return false;
  }
  return true;
}

bool identity_access(const Shape& s, const Shape& out) {
  if (ir::shape_numel(s) != ir::shape_numel(out)) return false;
  if (s.size() > out.size()) {  // e.g. [1] read by a loop over []: same elements in order?
    Shape a, b;
    for (int64_t d : s) {
      if (d != 1) a.push_back(d);
    }
    for (int64_t d : out) {
      if (d != 1) b.push_back(d);
    }
    return a == b;
  }
  Shape st = broadcast_strides(s, out), cs = ir::contiguous_strides(out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] != 1 && st[d] != cs[d]) return false;
  }
  return true;
}

// The first and last element a strided view touches, or {1, 0} when it touches none.
std::pair<int64_t, int64_t> footprint(const Shape& shape, const Shape& strides, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {1, 0};
    const int64_t span = (shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi};
}

// Whether view r of the scatter w's base and w's own view cover disjoint element ranges.
bool disjoint_views(const LoweredGraph& g, const Instr& r, const Instr& w) {
  const Shape& ws = g.instrs[w.inputs[1]].shape;
  if (r.attrs.ints.size() != r.shape.size() || w.attrs.ints.size() != ws.size()) return false;
  auto [rlo, rhi] = footprint(r.shape, r.attrs.ints, r.attrs.i0);
  auto [wlo, whi] = footprint(ws, w.attrs.ints, w.attrs.i0);
  return rlo > rhi || wlo > whi || rhi < wlo || whi < rlo;
}

// Whether reader r of v, in the unit of w, reads each position of v before w overwrites it
// there, or only positions w does not write; `reads` counts r's operands that are v.
bool reads_before_write(const InPlaceContext& c, int32_t v, int32_t w, int32_t r, int32_t reads) {
  const LoweredGraph& g = c.g;
  const Instr &in = g.instrs[w], &ri = g.instrs[r], &vi = g.instrs[v];
  const PlanUnit& U = c.units[c.unit_of[w]];
  if (!U.fused) {
    const ir::OpInfo& info = ir::op_info(ri.op);
    bool self_ok = (info.elementwise_inplace_ok && vi.shape == in.shape && vi.dtype == in.dtype &&
                    ri.op != Op::Matmul) ||
                   (info.updates_operand0 && reads == 1 && ri.inputs[0] == v);
    return self_ok && r == w;
  }
  // Multi-pass loops (LogSumExp, Argmax, softmax) read their inputs again after storing.
  const int32_t red = U.reduce;
  if (red == w && ir::shape_numel(in.shape) != ir::shape_numel(U.shape)) return false;
  if (red >= 0 && !splittable(g.instrs[red].op)) return false;
  if (dtype_size(vi.dtype) != dtype_size(in.dtype)) return false;
  if (!c.is_scatter[w]) {
    return ri.op == Op::AsStrided ? view_is_identity(ri, vi) : identity_access(vi.shape, U.shape);
  }
  // Written at the view's positions: the scatter's copy of its base v is then a no-op.
  if (r == w) return ri.inputs[0] == v && ri.inputs[1] != v;
  // A base other than v would be copied over v before the loop reads anything.
  if (ri.op != Op::AsStrided || in.inputs[0] != v) return false;
  const bool same_view = ri.attrs.ints == in.attrs.ints && ri.attrs.i0 == in.attrs.i0 &&
                         ri.shape == g.instrs[in.inputs[1]].shape;
  return same_view || disjoint_views(g, ri, in);
}

}  // namespace

std::vector<std::vector<int32_t>> donated_chains(const LoweredGraph& g,
                                                 const std::vector<int32_t>& donor_of_output) {
  const size_t n = g.instrs.size(), nout = g.outputs.size();
  std::vector<int32_t> first_out(n, -1);
  for (size_t o = nout; o-- > 0;) first_out[g.outputs[o]] = static_cast<int32_t>(o);
  std::vector<char> taken(n, 0);
  std::vector<std::vector<int32_t>> chains(nout);
  for (size_t o = 0; o < nout; ++o) {
    const int32_t x0 = g.outputs[o];
    if (donor_of_output[o] < 0 || first_out[x0] != static_cast<int32_t>(o)) continue;
    const int32_t pi = g.param_instr[donor_of_output[o]];
    std::vector<int32_t> links;
    bool valid = false;
    for (int32_t x = x0; backend::writes_over_operand0(g, x);) {
      const int32_t y = g.instrs[x].inputs[0];
      if (y == pi) {
        valid = true;
        break;
      }
      const Op op = g.instrs[y].op;
      if (op == Op::Parameter || op == Op::Scalar || first_out[y] >= 0 || taken[y]) break;
      links.push_back(y);
      x = y;
    }
    if (!valid) continue;
    std::reverse(links.begin(), links.end());
    for (int32_t y : links) taken[y] = 1;
    chains[o] = std::move(links);
  }
  return chains;
}

std::vector<std::vector<int32_t>> storage_readers(
    const LoweredGraph& g, const std::vector<std::vector<GemmOperand>>& gemm_ops) {
  const int32_t n = static_cast<int32_t>(g.instrs.size());
  std::vector<std::vector<int32_t>> readers(n);
  for (int32_t r = 0; r < n; ++r) {
    auto note = [&](int32_t c) {
      if (readers[c].empty() || readers[c].back() != r) readers[c].push_back(r);
    };
    if (!gemm_ops[r].empty()) {
      for (const GemmOperand& op : gemm_ops[r]) note(op.instr);
    } else {
      for (int32_t c : g.instrs[r].inputs) note(c);
    }
  }
  return readers;
}

Overwrite may_overwrite(const InPlaceContext& c, int32_t v, int32_t w) {
  const LoweredGraph& g = c.g;
  const int32_t u = c.unit_of[w];
  if (c.last_failing > c.pos[u]) return Overwrite::CanFail;
  // A version stored by w's own loop: its stores and w's would race for the same positions.
  if (c.unit_of[v] == u) return Overwrite::ReadAfter;
  for (int32_t r : c.readers[v]) {
    const int32_t ru = c.unit_of[r];
    int32_t reads = 0;
    if (!c.gemm_ops[r].empty()) {
      for (const GemmOperand& op : c.gemm_ops[r]) reads += op.instr == v;
    } else if (ru >= 0 && !c.skipped[ru]) {
      const auto& ins = g.instrs[r].inputs;
      reads = static_cast<int32_t>(std::count(ins.begin(), ins.end(), v));
    }
    if (reads == 0 || c.pos[ru] < c.pos[u]) continue;
    if (c.pos[ru] > c.pos[u]) return Overwrite::ReadAfter;
    if (!reads_before_write(c, v, w, r, reads)) return Overwrite::ReadsOther;
  }
  return Overwrite::Ok;
}

std::string copy_reason(const Instr& in, const char* what, int32_t out, Overwrite why) {
  const char* words = "the old value is still read after it";
  if (why == Overwrite::CanFail) words = "an op that can fail on a bad index runs after it";
  if (why == Overwrite::ReadsOther) words = "it reads the old value at other positions";
  return std::string(ir::op_name(in.op)) + " (" + what + " " + std::to_string(out) +
         ") computed into a temporary: " + words;
}

int32_t place_chain(const InPlaceContext& c, const std::vector<int32_t>& chain, int32_t o,
                    int32_t pi, std::vector<Loc>& loc, std::vector<int32_t>& storage_key,
                    std::vector<int32_t>& chain_out, std::string& why) {
  int32_t occupant = pi;
  for (int32_t y : chain) {
    if (!c.needs[y]) continue;  // computed inside its loop, never stored
    const Instr& in = c.g.instrs[y];
    Overwrite w = Overwrite::ReadsOther;
    if (value_bytes(in) == value_bytes(c.g.instrs[pi]) && c.unit_of[y] >= 0) {
      w = may_overwrite(c, occupant, y);
    }
    if (w != Overwrite::Ok) {
      if (why.empty()) why = copy_reason(in, "updating output", o, w);
      continue;
    }
    loc[y] = {LocKind::Output, o};
    storage_key[y] = pi;
    chain_out[y] = o;
    occupant = y;
  }
  return occupant;
}

}  // namespace lazyx::cpu
