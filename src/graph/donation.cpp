// Which parameter buffers a program may overwrite (ALIASING.md, rules 1-3), and why not.
#include <algorithm>
#include <unordered_set>

#include "graph/executor.h"
#include "ir/shape_infer.h"

namespace lazyx::graph {

namespace {

// The buffers that pending graphs outside this sync still read (partial syncs only).
std::unordered_set<const runtime::Buffer*> read_outside(const std::vector<Storage*>& targets) {
  std::unordered_set<const Storage*> in_sync(targets.begin(), targets.end());
  std::unordered_set<const runtime::Buffer*> read;
  std::unordered_set<const ir::Node*> seen;
  std::vector<const ir::Node*> stack;
  for (Storage* s = Storage::first_live(); s; s = s->next_live()) {
    if (!s->pending() || in_sync.count(s)) continue;
    stack.push_back(s->pending_node().get());
    while (!stack.empty()) {
      const ir::Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->op() == ir::Op::Parameter) read.insert(n->buffer().get());
      for (const auto& o : n->operands()) stack.push_back(o.get());
    }
  }
  return read;
}

// Fills `use` (reused across syncs: its vectors keep their capacity).
void buffer_uses(const DonationInput& in, std::vector<BufferUse>& use) {
  use.resize(in.params.size());
  for (BufferUse& u : use) {
    u.rewritten.clear();
    u.passthrough = u.holder = u.flagged = nullptr;
  }
  auto find = [&](const runtime::Buffer* b) -> BufferUse* {
    if (!b || b->walk_epoch != in.params_epoch) return nullptr;
    return &use[static_cast<size_t>(b->walk_slot)];
  };
  for (size_t t = 0; t < in.targets.size(); ++t) {
    if (BufferUse* u = find(in.target_passthrough[t])) u->passthrough = in.targets[t];
    if (in.target_output[t] < 0) continue;
    if (BufferUse* u = find(in.targets[t]->data().get())) u->rewritten.push_back(t);
  }
  for (Storage* s = Storage::first_live(); s; s = s->next_live()) {
    BufferUse* u = find(s->data().get());
    if (!u) continue;
    if (!u->holder) u->holder = s;
    if (s->donate_flag()) u->flagged = s;
  }
}

// Resets a report kept from an earlier sync, keeping its vectors' capacity.
void reset_report(ParamReport& r, const runtime::Buffer& b, const ir::Node& node) {
  r.buffer_id = b.id();
  r.bytes = static_cast<int64_t>(b.bytes());
  r.shape.assign(node.shape().begin(), node.shape().end());
  r.dtype = node.dtype();
  r.donated = false;
  r.output_index = r.output_tensor_id = -1;
  r.reason = AliasReason::NotUpdated;
  r.detail.clear();
}

}  // namespace

std::string DetailText::render() const {
  std::string out;
  for (const char* c = text; *c; ++c) {
    if (c[0] == '{' && c[1] >= '0' && c[1] <= '2' && c[2] == '}') {
      out += std::to_string(args[c[1] - '0']);
      c += 2;
    } else {
      out += *c;
    }
  }
  return out;
}

void decide_donation(const DonationInput& in, DonationPlan& plan) {
  std::vector<char>& output_taken = plan.output_taken;
  std::vector<char>& decided = plan.decided;
  std::vector<BufferUse>& uses = plan.uses;
  const size_t n = in.params.size();
  plan.donation.assign(n, -1);
  plan.reports.resize(n);
  plan.details.assign(n, DetailText{});
  plan.user_donated.clear();
  output_taken.assign(in.output_bytes.size(), 0);
  decided.assign(n, 0);
  buffer_uses(in, uses);
  std::unordered_set<const runtime::Buffer*> outside;  // computed on first need
  bool outside_known = false;
  // Pass 0 gives buffers to their own tensors' outputs (in-place updates) first, so that a
  // user-requested donation, which may take any output, never takes one of those (pass 1).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t p = 0; p < in.params.size(); ++p) {
      if (decided[p]) continue;
      const bool own_only = pass == 0;
      runtime::Buffer* b = in.params[p];
      ParamReport& r = plan.reports[p];  // pass 1 resets what an undecided pass 0 wrote
      reset_report(r, *b, *in.param_nodes[p]);

      // Who holds b now, and which of them this program rewrites.
      const std::vector<size_t>& rewritten = uses[p].rewritten;
      const Storage* passthrough = uses[p].passthrough;
      const Storage* flagged = uses[p].flagged;
      const Storage* holder = uses[p].holder;
      int holders = b->holders();
      int rewritten_n = static_cast<int>(rewritten.size());
      bool flagged_rewritten =
          flagged && std::any_of(rewritten.begin(), rewritten.end(),
                                 [&](size_t t) { return in.targets[t] == flagged; });
      // Holders that still need b after the program: neither rewritten nor giving it away.
      int others_kept = holders - rewritten_n - (flagged && !flagged_rewritten ? 1 : 0);

      auto text = [&](const char* t, std::initializer_list<int64_t> args) {
        DetailText& d = plan.details[p];
        d.text = t;
        std::copy(args.begin(), args.end(), d.args);
      };
      auto keep = [&](AliasReason why, const char* t, std::initializer_list<int64_t> args = {}) {
        if (own_only) return;  // decided in pass 1
        r.reason = why;
        text(t, args);
        decided[p] = 1;
      };
      auto donate = [&](int32_t out, AliasReason why, const char* t,
                        std::initializer_list<int64_t> args) {
        decided[p] = 1;
        plan.donation[p] = out;
        output_taken[out] = 1;
        r.donated = true;
        r.output_index = out;
        r.output_tensor_id = in.output_tensor[out];
        r.reason = why;
        text(t, args);
      };

      if (b->pinned()) {
        keep(AliasReason::CachedConstant, "owned by the constant cache (scalar_tensor)");
      } else if (passthrough) {
        keep(AliasReason::Shared, "tensor {0} takes this buffer as its value", {passthrough->id()});
      } else if (flagged && others_kept == 0) {
        // User-requested donation (rule 3): to the flagged tensor's own output if it has one,
        // else to the first free output of the same byte size.
        if (in.kind != SyncKind::MarkStep && !outside_known) {
          outside = read_outside(in.targets);
          outside_known = true;
        }
        if (in.kind != SyncKind::MarkStep && outside.count(b)) {
          keep(AliasReason::ReadElsewhere, "a pending tensor outside this sync still reads it");
        } else {
          int32_t out = -1;
          for (size_t t : rewritten) {
            int32_t o = in.target_output[t];
            if (!output_taken[o] && in.output_bytes[o] == b->bytes()) out = o;
          }
          for (size_t o = 0; !own_only && out < 0 && o < in.output_bytes.size(); ++o) {
            if (!output_taken[o] && in.output_bytes[o] == b->bytes()) out = static_cast<int32_t>(o);
          }
          if (out >= 0) {
            donate(out, AliasReason::UserRequested,
                   "set_buffer_donation on tensor {0}; reused by output {1} (tensor {2})",
                   {flagged->id(), out, in.output_tensor[out]});
            if (!flagged_rewritten) plan.user_donated.push_back(const_cast<Storage*>(flagged));
          } else {
            keep(AliasReason::NoMatchingOutput,
                 "donation requested, but no free output has {0} bytes",
                 {static_cast<int64_t>(b->bytes())});
          }
        }
      } else if (flagged) {
        keep(AliasReason::Shared,
             "donation requested on tensor {0}, but {1} other tensor(s) still hold this buffer",
             {flagged->id(), others_kept});
      } else if (rewritten_n == 0) {
        if (holder) {
          keep(AliasReason::NotUpdated, "tensor {0} holds it and this sync does not rewrite it",
               {holder->id()});
        } else {
          keep(AliasReason::NotUpdated, "read by the graph only; no tensor is rewritten from it");
        }
      } else if (holders > rewritten_n) {
        keep(AliasReason::Shared,
             "also the value of a tensor this sync does not rewrite ({0} other holder(s))",
             {holders - rewritten_n});
      } else if (in.kind != SyncKind::MarkStep) {
        keep(AliasReason::PartialSync, "partial syncs never donate on their own (rule 2)");
      } else if (!in.aliasing_enabled) {
        keep(AliasReason::Disabled, "LAZYX_ENABLE_PARAM_ALIASING=0");
      } else {
        // Rule 1a: the alias source of a rewritten tensor. Rule 1d: same bytes and dtype.
        int32_t out = -1;
        for (size_t t : rewritten) {
          int32_t o = in.target_output[t];
          if (!output_taken[o] && in.output_bytes[o] == b->bytes() &&
              in.output_dtype[o] == in.targets[t]->dtype()) {
            out = o;
            break;
          }
        }
        if (out >= 0) {
          donate(out, AliasReason::InPlaceUpdate,
                 "alias source of tensor {0}, updated in place; output {1} reuses it",
                 {in.output_tensor[out], out});
        } else {
          keep(AliasReason::NoMatchingOutput, "its tensor's output already reuses another buffer");
        }
      }
    }
  }
}

}  // namespace lazyx::graph
