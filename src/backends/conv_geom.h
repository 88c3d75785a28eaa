// A convolution instruction seen as one plain convolution problem: source (N, IC, in...),
// weight (OC, IC / G, ker...) and destination (N, OC, out...), and which of the three the
// instruction computes from the other two. Transposed convolutions and both gradients map onto
// it (a transposed forward is the backward-data of the convolution with the same weight).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace lazyx::conv {

// attrs.ints of the Conv ops: {k, stride[k], padding[k], dilation[k], output_padding[k],
// groups, transposed}.
struct ConvAttrs {
  int k = 0;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

inline std::vector<int64_t> pack_attrs(const ConvAttrs& a) {
  std::vector<int64_t> v{a.k};
  for (const auto* p : {&a.stride, &a.padding, &a.dilation, &a.output_padding}) {
    v.insert(v.end(), p->begin(), p->end());
  }
  v.push_back(a.groups);
  v.push_back(a.transposed ? 1 : 0);
  return v;
}

inline ConvAttrs unpack_attrs(const std::vector<int64_t>& v) {
  ConvAttrs a;
  a.k = static_cast<int>(v[0]);
  const size_t k = static_cast<size_t>(a.k);
  auto at = [&](size_t i) {
    return std::vector<int64_t>(v.begin() + 1 + i * k, v.begin() + 1 + (i + 1) * k);
  };
  a.stride = at(0);
  a.padding = at(1);
  a.dilation = at(2);
  a.output_padding = at(3);
  a.groups = v[1 + 4 * k];
  a.transposed = v[2 + 4 * k] != 0;
  return a;
}

enum class Dir : uint8_t { Fwd, BwdData, BwdWeight };
enum Role : int { kOperand0 = 0, kOperand1 = 1, kOutput = 2 };

struct Problem {
  Dir dir = Dir::Fwd;
  int k = 0;
  int src = 0, wei = 1, dst = 2;  // Role of each tensor
  int64_t n = 0, ic = 0, oc = 0, groups = 1;
  std::vector<int64_t> in, out, ker, stride, pad, dil;
};

// The problem of instruction `in` whose operands have shapes s0 and s1.
inline Problem make_problem(const backend::Instr& in, const Shape& s0, const Shape& s1) {
  const ConvAttrs a = unpack_attrs(in.attrs.ints);
  Problem p;
  p.k = a.k;
  const bool t = a.transposed;
  if (in.op == ir::Op::Conv) {
    p.dir = t ? Dir::BwdData : Dir::Fwd;
    p.src = t ? kOutput : kOperand0;
    p.dst = t ? kOperand0 : kOutput;
    p.wei = kOperand1;
  } else if (in.op == ir::Op::ConvBackwardInput) {
    p.dir = t ? Dir::Fwd : Dir::BwdData;
    p.src = t ? kOperand0 : kOutput;
    p.dst = t ? kOutput : kOperand0;
    p.wei = kOperand1;
  } else {
    p.dir = Dir::BwdWeight;
    p.src = t ? kOperand0 : kOperand1;
    p.dst = t ? kOperand1 : kOperand0;
    p.wei = kOutput;
  }
  const std::array<const Shape*, 3> shapes{&s0, &s1, &in.shape};
  const Shape& src = *shapes[p.src];
  const Shape& dst = *shapes[p.dst];
  const Shape& w = *shapes[p.wei];
  p.n = src[0];
  p.ic = src[1];
  p.oc = dst[1];
  p.groups = a.groups;
  p.in.assign(src.begin() + 2, src.end());
  p.out.assign(dst.begin() + 2, dst.end());
  p.ker.assign(w.begin() + 2, w.end());
  p.stride = a.stride;
  p.pad = a.padding;
  p.dil = a.dilation;
  return p;
}

}  // namespace lazyx::conv
