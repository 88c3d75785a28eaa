// What differs between a graph about to compile and one compiled earlier at the same sync site,
// in the user's terms: inputs, ops, constants baked into ops, outputs and donation.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "graph/diagnostics.h"
#include "ir/shape_infer.h"

namespace lazyx::graph::diag {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// The attributes that differ, named as reductions and views use them.
std::string attrs_diff(ir::Op op, const ir::Attrs& a, const ir::Attrs& b) {
  const bool reduce = ir::op_info(op).family == ir::OpFamily::Reduce;
  std::vector<std::string> parts;
  if (a.ints != b.ints) {
    parts.push_back(std::string(reduce ? "dims " : "sizes/strides ") + ints_str(a.ints) + " vs " +
                    ints_str(b.ints));
  }
  if (a.i0 != b.i0) {
    parts.push_back((reduce ? "dim " : "dim/offset ") + std::to_string(a.i0) + " vs " +
                    std::to_string(b.i0));
  }
  if (a.flag != b.flag) {
    parts.push_back(std::string(reduce ? "keepdim " : "flag ") + (a.flag ? "on" : "off") + " vs " +
                    (b.flag ? "on" : "off"));
  }
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

std::string op_label(const backend::Instr& in, size_t k) {
  return "op " + std::to_string(k) + " (" + ir::op_name(in.op) + ")";
}

// A parameter's tensor in words: the output tensor it was donated to, else its buffer.
std::string param_words(const ParamReport& p) {
  if (p.output_tensor_id >= 0) return "buffer of tensor " + std::to_string(p.output_tensor_id);
  return "buffer " + std::to_string(p.buffer_id);
}

void compare_params(const Signature& a, const Signature& b, std::vector<Difference>& out) {
  const auto& pa = a.graph.param_instr;
  const auto& pb = b.graph.param_instr;
  if (pa.size() != pb.size()) {  // inputs by position would not be the same tensors
    out.push_back(
        {"structure", std::to_string(pa.size()) + " inputs vs " + std::to_string(pb.size())});
    return;
  }
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    const backend::Instr& x = a.graph.instrs[pa[i]];
    const backend::Instr& y = b.graph.instrs[pb[i]];
    if (x.shape != y.shape) {
      out.push_back({"input_shape", "input " + std::to_string(i) + " shape " +
                                        ir::shape_str(x.shape) + " vs " + ir::shape_str(y.shape)});
    }
    if (x.dtype != y.dtype) {
      out.push_back({"input_dtype", "input " + std::to_string(i) + " dtype " + dtype_name(x.dtype) +
                                        " vs " + dtype_name(y.dtype)});
    }
  }
}

// Which ops one graph has more of than the other: " (added: exp; removed: add)".
std::string op_count_diff(const std::vector<backend::Instr>& a,
                          const std::vector<backend::Instr>& b) {
  std::map<std::string, int> n;
  for (const auto& i : a) n[ir::op_name(i.op)]++;
  for (const auto& i : b) n[ir::op_name(i.op)]--;
  std::string added, removed;
  for (const auto& [op, c] : n) {
    std::string& s = c > 0 ? added : removed;
    if (c == 0) continue;
    s += (s.empty() ? "" : ", ") + op + (std::abs(c) > 1 ? " x" + std::to_string(std::abs(c)) : "");
  }
  if (added.empty() && removed.empty()) return "";
  std::string r = " (";
  if (!added.empty()) r += "added: " + added;
  if (!removed.empty()) r += std::string(added.empty() ? "" : "; ") + "removed: " + removed;
  return r + ")";
}

void compare_ops(const Signature& a, const Signature& b, std::vector<Difference>& out) {
  const auto& ia = a.graph.instrs;
  const auto& ib = b.graph.instrs;
  const bool same_size = ia.size() == ib.size();
  if (!same_size) {  // ops by position would not line up: name what was added and removed
    out.push_back({"structure", std::to_string(ia.size()) + " nodes vs " +
                                    std::to_string(ib.size()) + op_count_diff(ia, ib)});
  }
  for (size_t k = 0; same_size && k < ia.size(); ++k) {
    const backend::Instr& x = ia[k];
    const backend::Instr& y = ib[k];
    if (x.op == ir::Op::Parameter && y.op == ir::Op::Parameter) continue;  // the inputs above
    if (x.op != y.op) {
      out.push_back({"op", "op " + std::to_string(k) + ": " + ir::op_name(x.op) + " vs " +
                               ir::op_name(y.op)});
      continue;
    }
    if (!(x.attrs == y.attrs)) {
      out.push_back({"baked_constant", op_label(x, k) +
                                           ": a constant baked into the graph changed (" +
                                           attrs_diff(x.op, x.attrs, y.attrs) + ")"});
    }
    if (x.op == ir::Op::Scalar && x.dtype != y.dtype) {
      out.push_back({"scalar", "op " + std::to_string(k) + ": a host scalar of dtype " +
                                   dtype_name(x.dtype) + " now, " + dtype_name(y.dtype) +
                                   " before (an int and a float scalar make different programs)"});
      continue;
    }
    if (x.inputs != y.inputs) {
      out.push_back({"structure", op_label(x, k) + " reads nodes " +
                                      ints_str({x.inputs.begin(), x.inputs.end()}) + " vs " +
                                      ints_str({y.inputs.begin(), y.inputs.end()})});
    } else if (x.dtype != y.dtype) {
      out.push_back(
          {"op", op_label(x, k) + " dtype " + dtype_name(x.dtype) + " vs " + dtype_name(y.dtype)});
    } else if (x.shape != y.shape) {
      out.push_back({"op", op_label(x, k) + " shape " + ir::shape_str(x.shape) + " vs " +
                               ir::shape_str(y.shape)});
    }
  }
  auto scalars = [](const std::vector<backend::Instr>& v) {
    return std::count_if(v.begin(), v.end(), [](const auto& i) { return i.op == ir::Op::Scalar; });
  };
  if (scalars(ia) > scalars(ib)) {
    out.push_back({"new_scalar", "new scalar in the graph: " + std::to_string(scalars(ia)) +
                                     " host scalars vs " + std::to_string(scalars(ib)) +
                                     " (their values are run-time operands, where they are used "
                                     "is part of the program)"});
  }
  if (same_size && a.graph.outputs != b.graph.outputs) {
    out.push_back(
        {"structure", "outputs " + ints_str({a.graph.outputs.begin(), a.graph.outputs.end()}) +
                          " vs " + ints_str({b.graph.outputs.begin(), b.graph.outputs.end()})});
  }
}

void compare_donation(const Signature& a, const Signature& b, std::vector<Difference>& out) {
  const auto& da = a.graph.donation;
  const auto& db = b.graph.donation;
  if (da.size() != db.size()) return;  // other inputs: compare_params says so
  // Buffers whose donation flipped for the same reason are named together.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // (change, who)
  for (size_t i = 0; i < da.size(); ++i) {
    if ((da[i] >= 0) == (db[i] >= 0)) {
      if (da[i] != db[i]) {
        out.push_back({"donation", "donation pattern: input " + std::to_string(i) +
                                       " donated to output " + std::to_string(da[i]) +
                                       " now, to output " + std::to_string(db[i]) + " before"});
      }
      continue;
    }
    const bool now = da[i] >= 0;
    const ParamReport* pa = i < a.params.size() ? &a.params[i] : nullptr;
    const ParamReport* pb = i < b.params.size() ? &b.params[i] : nullptr;
    const ParamReport* named = now ? pa : pb;
    const ParamReport* kept = now ? pb : pa;
    std::string who = named ? param_words(*named) : "input " + std::to_string(i);
    std::string why = kept ? std::string(alias_reason_name(kept->reason)) +
                                 (kept->detail.empty() ? "" : ": " + kept->detail)
                           : "";
    std::string change =
        std::string(now ? " donated now, kept before" : " kept now, donated before") +
        (why.empty() ? "" : " (" + why + ")");
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& e) { return e.first == change; });
    if (g == groups.end()) g = groups.insert(groups.end(), {change, {}});
    g->second.push_back(who);
  }
  for (const auto& [change, who] : groups) {
    std::string names = who[0];
    for (size_t i = 1; i < who.size() && i < 4; ++i) names += ", " + who[i];
    if (who.size() > 4) names += " and " + std::to_string(who.size() - 4) + " more";
    out.push_back({"donation", "donation pattern: " + names + change});
  }
}

}  // namespace

std::vector<Difference> differences(const Signature& now, const Signature& before) {
  std::vector<Difference> out;
  compare_params(now, before, out);
  compare_donation(now, before, out);
  compare_ops(now, before, out);
  return out;
}

}  // namespace lazyx::graph::diag
