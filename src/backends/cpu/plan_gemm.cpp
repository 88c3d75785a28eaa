// The GEMM side of the cpu plan (plan_gemm.h).
#include "backends/cpu/plan_gemm.h"

#include <algorithm>

#include "ir/shape_infer.h"

namespace lazyx::cpu {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;

// Batch strides of an operand of shape s with element strides st, over the output's batch dims
// (right-aligned; 0 where the operand broadcasts).
Shape gemm_batch_strides(const Shape& s, const Shape& st, const Shape& out) {
  const size_t nb = out.size() - 2, ob = s.size() - 2;
  Shape r(nb, 0);
  for (size_t d = 0; d < ob; ++d) r[d + nb - ob] = s[d] == 1 ? 0 : st[d];
  return r;
}

// A float32 AsStrided operand of a float32 matmul that sgemm can read in place: each matrix has
// contiguous rows or columns with a leading dimension; batch dims may have any strides.
bool gemm_view(const LoweredGraph& g, int32_t c, const Shape& out, GemmOperand& op) {
  const Instr& v = g.instrs[c];
  if (v.op != Op::AsStrided || v.shape.size() < 2 || v.dtype != kFloat32) return false;
  const Instr& x = g.instrs[v.inputs[0]];
  if (x.op == Op::Scalar || x.dtype != kFloat32 || ir::shape_numel(v.shape) == 0) return false;
  const size_t q = v.shape.size() - 2;
  const int64_t r = v.shape[q], k = v.shape[q + 1], s0 = v.attrs.ints[q], s1 = v.attrs.ints[q + 1];
  op.instr = v.inputs[0];
  op.offset = v.attrs.i0;
  op.batch = gemm_batch_strides(v.shape, v.attrs.ints, out);
  if ((k <= 1 || s1 == 1) && (r <= 1 || s0 >= k)) {
    op.trans = 'N';
    op.ld = r <= 1 ? std::max<int64_t>(k, 1) : s0;
    return true;
  }
  if ((r <= 1 || s0 == 1) && (k <= 1 || s1 >= r)) {
    op.trans = 'T';
    op.ld = k <= 1 ? std::max<int64_t>(r, 1) : s1;
    return true;
  }
  return false;
}

bool accum_candidate(const LoweredGraph& g, int32_t m, const std::vector<int32_t>& consumer,
                     const std::vector<int32_t>& nuses, const std::vector<int32_t>& group,
                     const std::vector<std::vector<int32_t>>& outputs, Accum& a) {
  const Instr& mi = g.instrs[m];
  if (mi.op != Op::Matmul || mi.dtype != kFloat32 || nuses[m] != 1 || !outputs[m].empty()) {
    return false;
  }
  for (int32_t x : mi.inputs) {
    if (g.instrs[x].dtype != kFloat32) return false;
  }
  auto same = [&](int32_t x) {
    return g.instrs[x].shape == mi.shape && g.instrs[x].dtype == kFloat32;
  };
  int32_t t = m, c = consumer[m], scale = -1;
  if (c >= 0 && group[c] >= 0 && g.instrs[c].op == Op::Mul && same(c) && nuses[c] == 1 &&
      outputs[c].empty()) {
    const auto& ins = g.instrs[c].inputs;
    int32_t other = ins[0] == m ? ins[1] : ins[0];
    if (ins[0] != ins[1] && g.instrs[other].op == Op::Scalar) {
      scale = other;
      t = c;
      c = consumer[c];
    }
  }
  if (c < 0 || group[c] < 0 || (t != m && group[t] != group[c]) || !same(c)) return false;
  const Instr& ci = g.instrs[c];
  if ((ci.op != Op::Add && ci.op != Op::Sub) || ci.inputs[0] == ci.inputs[1]) return false;
  int32_t y = ci.inputs[0] == t ? ci.inputs[1] : ci.inputs[0];
  if (g.instrs[y].op != Op::Parameter || !same(y)) return false;
  if (ci.inputs.size() == 3) {  // add/sub's alpha scales operand 1: it must be the product
    if (ci.inputs[1] != t || scale >= 0 || g.instrs[ci.inputs[2]].op != Op::Scalar) return false;
    scale = ci.inputs[2];
  }
  a = {m, t, c, y, scale, 1, 1};
  if (ci.op == Op::Sub) (ci.inputs[1] == t ? a.alpha : a.beta) = -1;
  return true;
}

LoweredGraph widen_half_matmuls(const LoweredGraph& g) {
  auto half = [](Dtype d) { return d == kFloat16 || d == kBFloat16; };
  bool any = false;
  for (const Instr& in : g.instrs) {
    any |= in.op == Op::Matmul && half(in.dtype) && in.inputs.size() == 2 &&
           g.instrs[in.inputs[0]].dtype == in.dtype && g.instrs[in.inputs[1]].dtype == in.dtype;
  }
  if (!any) return g;
  LoweredGraph w = g;
  w.instrs.clear();
  std::vector<int32_t> moved(g.instrs.size(), -1);  // old index -> new index
  auto push = [&](Instr in) {
    w.instrs.push_back(std::move(in));
    return static_cast<int32_t>(w.instrs.size() - 1);
  };
  for (size_t i = 0; i < g.instrs.size(); ++i) {
    Instr in = g.instrs[i];
    for (int32_t& c : in.inputs) c = moved[c];
    const bool widen = in.op == Op::Matmul && half(in.dtype) && in.inputs.size() == 2 &&
                       w.instrs[in.inputs[0]].dtype == in.dtype &&
                       w.instrs[in.inputs[1]].dtype == in.dtype;
    if (!widen) {
      moved[i] = push(std::move(in));
      continue;
    }
    const Dtype d = in.dtype;
    for (int32_t& c : in.inputs) {
      Instr cast{Op::Cast, kFloat32, w.instrs[c].shape, {}, {c}, -1};
      c = push(std::move(cast));
    }
    in.dtype = kFloat32;
    const Shape shape = in.shape;
    int32_t m = push(std::move(in));
    moved[i] = push(Instr{Op::Cast, d, shape, {}, {m}, -1});
  }
  for (int32_t& o : w.outputs) o = moved[o];
  for (int32_t& p : w.param_instr) p = moved[p];
  return w;
}

}  // namespace lazyx::cpu
