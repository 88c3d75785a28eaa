// The reference backend: interprets a lowered graph one instruction at a time. It is the oracle
// for every other backend, and it honours donation physically (rules 5 and 6).
#include <algorithm>
#include <cstring>
#include <map>

#include "backends/backend.h"
#include "backends/reference/kernels.h"
#include "dist/process_group.h"
#include "ir/shape_infer.h"
#include "lazyx/error.h"

namespace lazyx::reference {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;

namespace {

// Where each scheduled instruction writes. Decided at compile time: the decisions depend only
// on the program, so execute replays them.
// Chain: an intermediate update (through a view, an index op or elementwise) of a donated
// tensor, written into the donated buffer because nothing reads its input afterwards.
enum class Dst : uint8_t { Skip, Donated, Temp, Fresh, Chain };

class RefProgram : public backend::Program {
 public:
  LoweredGraph g;
  std::vector<int32_t> schedule;
  std::vector<Dst> dst;                 // per schedule position
  std::vector<int32_t> chain_out;       // per instruction: the donated output a Chain writes
  std::vector<int32_t> uses;            // operand reads of each instruction
  std::vector<int32_t> output_of;       // instruction -> output index, or -1
  std::vector<int32_t> donor_of_output; // output -> donated parameter slot, or -1
  // Index ops whose indices are checked right after schedule position k (their last index
  // operand), so that donated writes need not wait for the ops themselves.
  std::vector<std::vector<int32_t>> checks;
  // A failed allocation must not leave a donated buffer half written, so every allocation
  // after the first direct write into a donated buffer comes from buffers allocated just
  // before it: `reserve` (byte size, count) at schedule position `reserve_at` (-1: none).
  int64_t reserve_at = -1;
  std::vector<std::pair<size_t, int32_t>> reserve;
  int64_t peak_scratch = 0;  // bytes of intermediates and temporaries alive at once, at most
  std::string why_scratch;
  int64_t scratch_bytes() const override { return peak_scratch; }
  std::string scratch_reason() const override { return why_scratch; }
};

size_t instr_bytes(const Instr& in) {
  return static_cast<size_t>(ir::shape_numel(in.shape)) * dtype_size(in.dtype);
}

// Candidate chains: the intermediates between a donated output and its parameter along
// operand 0, each of which may write over its operand 0 (x.slice(..).add_ twice, mul_ then
// index_copy_). Returns, per instruction, the donated output it may be written into, or -1.
std::vector<int32_t> chain_candidates(const RefProgram& p) {
  const LoweredGraph& g = p.g;
  std::vector<int32_t> chain_out(g.instrs.size(), -1);
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (p.donor_of_output[o] < 0) continue;
    const int32_t pi = g.param_instr[p.donor_of_output[o]];
    std::vector<int32_t> links;
    int32_t x = g.outputs[o];
    bool valid = false;
    while (backend::writes_over_operand0(g, x)) {
      const int32_t y = g.instrs[x].inputs[0];
      if (y == pi) {
        valid = true;
        break;
      }
      const Op yop = g.instrs[y].op;
      if (yop == Op::Parameter || yop == Op::Scalar || p.output_of[y] >= 0 || chain_out[y] >= 0) {
        break;
      }
      links.push_back(y);
      x = y;
    }
    if (!valid) continue;
    for (int32_t y : links) chain_out[y] = static_cast<int32_t>(o);
  }
  return chain_out;
}

// The step report's words for a donated tensor's update written to a full-size copy.
std::string copy_reason(const Instr& in, const char* what, int32_t out, bool checks_done,
                        bool self_ok) {
  const char* why = !checks_done ? "an op that can fail on a bad index runs after it"
                    : !self_ok   ? "it reads the old value at other positions"
                                 : "the old value is still read after it";
  return std::string(ir::op_name(in.op)) + " (" + what + " " + std::to_string(out) +
         ") written to a temporary: " + why;
}

// Decides every instruction's destination (see Dst) and plans the reserve.
void plan_destinations(RefProgram& p) {
  const LoweredGraph& g = p.g;
  p.chain_out = chain_candidates(p);
  std::vector<int32_t> remaining = p.uses;
  // Per donated output: the chain link whose value its buffer holds now, or -1.
  std::vector<int32_t> occupant(g.outputs.size(), -1);
  // Whether the value in output o's buffer has no readers left but instruction `in`.
  auto occupant_done = [&](size_t o, const Instr& in) {
    const int32_t occ = occupant[o];
    return occ < 0 || remaining[occ] - std::count(in.inputs.begin(), in.inputs.end(), occ) == 0;
  };
  int32_t failing_left = 0;
  std::vector<char> hoisted(g.instrs.size(), 0);
  for (const auto& ck : p.checks) {
    for (int32_t i : ck) hoisted[i] = 1;
  }
  // An op that can fail and is not checked ahead checks itself before it writes.
  auto fails_itself = [&](const Instr& in, int32_t i) {
    return ir::op_info(in.op).can_fail && !hoisted[i];
  };
  for (int32_t i : p.schedule) failing_left += ir::op_info(g.instrs[i].op).can_fail ? 1 : 0;
  std::map<size_t, int32_t> free_n, need;  // after reserve_at: free reserve buffers, and peak
  std::vector<char> owned(g.instrs.size(), 0);
  int64_t live_scratch = 0;
  p.dst.clear();
  for (size_t k = 0; k < p.schedule.size(); ++k) {
    const int32_t i = p.schedule[k];
    const Instr& in = g.instrs[i];
    const int32_t out = p.output_of[i];
    const bool leaf = in.op == Op::Parameter || in.op == Op::Scalar;
    Dst d = Dst::Fresh;
    if (leaf && out < 0) {
      d = Dst::Skip;
    } else if (out < 0 && p.chain_out[i] >= 0) {
      const int32_t c = in.inputs[0], o = p.chain_out[i];
      const bool start = c == g.param_instr[p.donor_of_output[o]] && occupant[o] < 0;
      bool checks_done = failing_left - (fails_itself(in, i) ? 1 : 0) == 0;
      if (checks_done && (start ? remaining[c] == 1 : c == occupant[o] && occupant_done(o, in))) {
        d = Dst::Chain;
        occupant[o] = i;
      } else if (p.why_scratch.empty()) {
        p.why_scratch = copy_reason(in, "updating output", o, checks_done, true);
      }
    } else if (out >= 0 && p.donor_of_output[out] >= 0) {
      int32_t pi = g.param_instr[p.donor_of_output[out]];
      int32_t self_reads = static_cast<int32_t>(std::count(in.inputs.begin(), in.inputs.end(), pi));
      const ir::OpInfo& info = ir::op_info(in.op);
      bool self_ok = self_reads == 0 ||
                     (info.elementwise_inplace_ok && g.instrs[pi].shape == in.shape &&
                      g.instrs[pi].dtype == in.dtype) ||
                     (info.updates_operand0 && self_reads == 1 && in.inputs[0] == pi);
      bool others_pending = remaining[pi] - self_reads > 0;
      bool checks_done = failing_left - (fails_itself(in, i) ? 1 : 0) == 0;
      // Rule 6: when the old value is still needed, write a temporary and copy at the end.
      d = self_ok && !others_pending && checks_done && !leaf && occupant_done(out, in)
              ? Dst::Donated
              : Dst::Temp;
      if (d == Dst::Temp && p.why_scratch.empty()) {
        p.why_scratch = leaf ? std::string(ir::op_name(in.op)) + " output " + std::to_string(out) +
                                   " is a parameter copied at the end"
                             : copy_reason(in, "output", out, checks_done, self_ok);
      }
    }
    p.dst.push_back(d);
    if ((d == Dst::Donated || d == Dst::Chain) && p.reserve_at < 0) {
      p.reserve_at = static_cast<int64_t>(k);
    }
    if (d == Dst::Temp || (d == Dst::Fresh && out < 0)) {
      live_scratch += static_cast<int64_t>(instr_bytes(in));
      p.peak_scratch = std::max(p.peak_scratch, live_scratch);
    }
    if (d == Dst::Temp || d == Dst::Fresh) {
      owned[i] = out < 0;  // only non-outputs are released early
      if (p.reserve_at >= 0) {
        size_t bytes = instr_bytes(in);
        if (free_n[bytes] > 0)
          free_n[bytes]--;
        else
          need[bytes]++;
      }
    }
    if (fails_itself(in, i)) failing_left--;
    failing_left -= static_cast<int32_t>(p.checks[k].size());
    if (d == Dst::Skip) continue;
    for (int32_t c : in.inputs) {
      if (--remaining[c] == 0 && owned[c]) {
        owned[c] = 0;
        live_scratch -= static_cast<int64_t>(instr_bytes(g.instrs[c]));
        if (p.reserve_at >= 0) free_n[instr_bytes(g.instrs[c])]++;
      }
    }
  }
  for (const auto& [bytes, n] : need) p.reserve.emplace_back(bytes, n);
}

// Each index op's check goes right after the last of its index operands in the schedule.
void plan_checks(RefProgram& p) {
  const LoweredGraph& g = p.g;
  std::vector<int32_t> at(g.instrs.size(), -1);
  for (size_t k = 0; k < p.schedule.size(); ++k) at[p.schedule[k]] = static_cast<int32_t>(k);
  p.checks.assign(p.schedule.size(), {});
  for (int32_t i : p.schedule) {
    const Instr& in = g.instrs[i];
    const std::vector<int32_t> ix = index_operands(in);
    if (ix.empty() || !ir::op_info(in.op).can_fail) continue;
    int32_t k = 0;
    for (int32_t q : ix) k = std::max(k, at[in.inputs[q]]);
    p.checks[k].push_back(i);
  }
}

// Post-order from the outputs, non-donated outputs first, so that the other readers of a donated
// buffer tend to run before the instruction that overwrites it.
std::vector<int32_t> make_schedule(const LoweredGraph& g, const std::vector<int32_t>& donor) {
  std::vector<int32_t> roots;
  for (size_t o = 0; o < g.outputs.size(); ++o) if (donor[o] < 0) roots.push_back(g.outputs[o]);
  for (size_t o = 0; o < g.outputs.size(); ++o) if (donor[o] >= 0) roots.push_back(g.outputs[o]);
  std::vector<char> seen(g.instrs.size(), 0);
  std::vector<int32_t> order;
  std::vector<std::pair<int32_t, size_t>> stack;
  for (int32_t r : roots) {
    if (seen[r]) continue;
    seen[r] = 1;
    stack.emplace_back(r, 0);
    while (!stack.empty()) {
      auto& [i, next] = stack.back();
      const Instr& in = g.instrs[i];
      // An index op's indices first, so that their check comes as early as it can.
      const std::vector<int32_t> ix = index_operands(in);
      if (next < ix.size() + in.inputs.size()) {
        int32_t c = next < ix.size() ? in.inputs[ix[next]] : in.inputs[next - ix.size()];
        ++next;
        if (!seen[c]) {
          seen[c] = 1;
          stack.emplace_back(c, 0);
        }
        continue;
      }
      order.push_back(i);
      stack.pop_back();
    }
  }
  return order;
}

class ReferenceBackend : public backend::Backend {
 public:
  std::string name() const override { return "reference"; }

  std::unique_ptr<backend::Program> compile(const LoweredGraph& g) override {
    auto p = std::make_unique<RefProgram>();
    p->g = g;
    p->output_of.assign(g.instrs.size(), -1);
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      if (p->output_of[g.outputs[o]] < 0) p->output_of[g.outputs[o]] = static_cast<int32_t>(o);
    }
    p->donor_of_output.assign(g.outputs.size(), -1);
    for (size_t s = 0; s < g.donation.size(); ++s) {
      if (g.donation[s] >= 0) p->donor_of_output[g.donation[s]] = static_cast<int32_t>(s);
    }
    p->schedule = make_schedule(g, p->donor_of_output);
    p->uses.assign(g.instrs.size(), 0);
    for (int32_t i : p->schedule) {
      for (int32_t c : g.instrs[i].inputs) p->uses[c]++;
    }
    plan_checks(*p);
    plan_destinations(*p);
    return p;
  }

  void execute(backend::Program& prog, const backend::ExecArgs& args) override {
    auto& p = static_cast<RefProgram&>(prog);
    const LoweredGraph& g = p.g;
    std::vector<Val> vals(g.instrs.size());
    std::vector<runtime::BufferPtr> owner(g.instrs.size());
    std::vector<int32_t> remaining = p.uses;
    std::vector<int64_t> scalar_store(g.instrs.size() * 1, 0);
    std::vector<std::pair<int32_t, runtime::BufferPtr>> deferred;  // output, temp
    std::multimap<size_t, runtime::BufferPtr> reserve;
    bool reserved = false;
    auto& outputs = *args.outputs;
    auto take = [&](size_t bytes) {
      if (!reserved) return allocate(bytes);
      auto it = reserve.find(bytes);
      if (it == reserve.end())
        ir::fail("execute", "internal: reference backend reserve exhausted.");
      runtime::BufferPtr b = std::move(it->second);
      reserve.erase(it);
      return b;
    };
    std::vector<const Val*> ops;

    for (size_t k = 0; k < p.schedule.size(); ++k) {
      const int32_t i = p.schedule[k];
      const Instr& in = g.instrs[i];
      Val& v = vals[i];
      v.dtype = in.dtype;
      v.shape = in.shape;
      if (in.op == Op::Parameter) {
        v.data = static_cast<char*>(args.params[in.slot]->data());
        if (!args.param_offsets.empty()) v.data += args.param_offsets[in.slot];
      } else if (in.op == Op::Scalar) {
        v.data = reinterpret_cast<char*>(&scalar_store[i]);
        const auto& s = args.scalars[in.slot];
        if (is_floating(in.dtype)) set_f(v, 0, s.f); else set_i(v, 0, s.i);
      }
      const Dst d = p.dst[k];
      if (d == Dst::Skip) {
        run_checks(p, k, vals);
        continue;
      }
      if (static_cast<int64_t>(k) == p.reserve_at) {  // before the first donated write
        for (const auto& [bytes, n] : p.reserve) {
          for (int32_t c = 0; c < n; ++c) reserve.emplace(bytes, allocate(bytes));
        }
        reserved = true;
      }

      // Where this instruction writes.
      const int32_t out = p.output_of[i];
      size_t bytes = instr_bytes(in);
      Val dst{nullptr, in.dtype, in.shape};
      if (d == Dst::Donated) {
        dst.data = static_cast<char*>(outputs[out]->data());
      } else if (d == Dst::Chain) {
        dst.data = static_cast<char*>(outputs[p.chain_out[i]]->data());
      } else if (d == Dst::Temp) {
        runtime::BufferPtr t = take(bytes);
        deferred.emplace_back(out, t);
        owner[i] = t;
        dst.data = static_cast<char*>(t->data());
      } else {
        runtime::BufferPtr b = take(bytes);
        if (out >= 0) outputs[out] = b;
        owner[i] = b;
        dst.data = static_cast<char*>(b->data());
      }

      if (in.op == Op::Parameter || in.op == Op::Scalar) {
        std::memcpy(dst.data, v.data, bytes);
      } else {
        ops.clear();
        for (int32_t c : in.inputs) ops.push_back(&vals[c]);
        run(in, ops, dst);
      }
      v.data = dst.data;
      run_checks(p, k, vals);
      for (int32_t c : in.inputs) {
        if (--remaining[c] == 0 && p.output_of[c] < 0 && owner[c]) {
          if (reserved) {
            size_t cb = owner[c]->bytes();
            reserve.emplace(cb, std::move(owner[c]));
          }
          owner[c].reset();
        }
      }
    }
    for (auto& [out, tmp] : deferred) {
      std::memcpy(outputs[out]->data(), tmp->data(), tmp->bytes());
    }
  }

 private:
  // The index checks planned after schedule position k, on the values computed so far.
  static void run_checks(const RefProgram& p, size_t k, const std::vector<Val>& vals) {
    for (int32_t i : p.checks[k]) {
      const Instr& in = p.g.instrs[i];
      std::vector<Val> args;
      for (int32_t c : in.inputs) {
        args.push_back({vals[c].data, p.g.instrs[c].dtype, p.g.instrs[c].shape});
      }
      std::vector<const Val*> ops;
      for (const Val& a : args) ops.push_back(&a);
      check_indices(in, ops);
    }
  }

  static void run(const Instr& in, const std::vector<const Val*>& a, const Val& out) {
    switch (ir::op_info(in.op).family) {
      case ir::OpFamily::Elementwise: run_elementwise(in, a, out); return;
      case ir::OpFamily::Reduce: run_reduce(in, *a[0], out); return;
      case ir::OpFamily::Collective: dist::run_collective(in, a, out); return;
      default: break;
    }
    switch (in.op) {
      case Op::Softmax:
      case Op::LogSoftmax: run_softmax(in, *a[0], out); return;
      case Op::Matmul: run_matmul(in, *a[0], *a[1], out); return;
      case Op::AsStrided: run_as_strided(in, *a[0], out); return;
      case Op::AsStridedScatter: run_as_strided_scatter(in, *a[0], *a[1], out); return;
      case Op::Cat: run_cat(in, a, out); return;
      // [math ops]

      // [sort/scan ops]
      case Op::Sort: run_sort(in, *a[0], out); return;
      case Op::Scan: run_scan(in, *a[0], out); return;
      case Op::ScatterReduce: run_scatter_reduce(in, a, out); return;

      // [conv ops]
      case Op::Conv:
      case Op::ConvBackwardInput:
      case Op::ConvBackwardWeight: run_conv(in, *a[0], *a[1], out); return;

      // [pool ops]
      case Op::TapSum:
      case Op::TapMax:
      case Op::TapScatter: run_taps(in, a, out); return;

      // [sampling ops]
      case Op::GridSample:
      case Op::GridSampleBackward: run_grid_sample(in, a, out); return;
      case Op::SegmentReduce:
      case Op::SegmentReduceBackward: run_segment_reduce(in, a, out); return;
      case Op::Histogram: run_histogram(in, a, out); return;

      default: run_index(in, a, out); return;
    }
  }
};

}  // namespace

}  // namespace lazyx::reference

namespace lazyx::backend {
std::unique_ptr<Backend> make_reference_backend() {
  return std::make_unique<reference::ReferenceBackend>();
}
}  // namespace lazyx::backend
