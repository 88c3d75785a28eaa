// sync and mark_step: collect pending storages, lower their graph, donate, compile or reuse,
// execute, and hand the outputs back to the storages.
#include "graph/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "backends/backend.h"
#include "dist/process_group.h"
#include "graph/diagnostics.h"
#include "graph/program.h"
#include "ir/shape_infer.h"
#include "lazyx/debug.h"
#include "lazyx/diagnostics.h"
#include "lazyx/error.h"
#include "lazyx/metrics.h"
#include "runtime/allocator.h"
#include "runtime/env.h"
#include "runtime/scratch.h"

namespace lazyx::graph {

namespace {

uint64_t walk_epoch_counter = 0;
int64_t sync_counter = 0;
// The last sync's report and the one the next sync writes (its lists keep their capacity, so a
// cached step allocates nothing for its report). A nested sync writes a report of its own.
StepReport report_slots[2];
int last_slot = 0;
int sync_depth = 0;
std::vector<Storage*> spare_targets;   // the last mark_step's target list, kept for its capacity
std::vector<DetailText> last_details;  // the last report's detail texts, until rendered
std::vector<ParamReport> spare_params;  // a report's parameters from two syncs ago: capacity

StepReport& last_report() { return report_slots[last_slot]; }

// The report a sync at depth 0 writes: reset, with its lists' capacity kept.
StepReport& next_report() {
  StepReport& r = report_slots[1 - last_slot];
  spare_params = std::move(r.params);  // for decide_donation, which rewrites every field
  r.params.clear();                    // a sync with nothing to run reports no parameters
  // Field by field: the strings and lists keep their capacity. A new field must be reset here.
  static_assert(sizeof(void*) != 8 || sizeof(StepReport) == 5 * sizeof(std::string) + 3 * 24 + 104,
                "StepReport changed: reset the new field in next_report()");
  r.kind.clear();
  r.step = 0;
  r.graph_hash = 0;
  r.ran_program = r.cache_hit = false;
  r.num_nodes = r.num_parameters = r.num_scalars = r.num_outputs = 0;
  r.num_donated = r.donated_bytes = 0;
  r.materialized.clear();
  r.kept_live.clear();
  r.compile_ms = r.execute_ms = 0;
  r.bytes_allocated = 0;
  r.scratch_bytes = -1;
  r.scratch_reason.clear();
  r.backend.clear();
  r.cause.clear();
  r.compile_reason.clear();
  return r;
}

struct DepthGuard {
  DepthGuard() { ++sync_depth; }
  ~DepthGuard() { --sync_depth; }
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

const char* kind_name(SyncKind k) {
  switch (k) {
    case SyncKind::MarkStep: return "mark_step";
    case SyncKind::Sync: return "sync";
    case SyncKind::Read: return "read";
  }
  return "?";
}

// The program's view of the pending graph: instruction order, parameters, scalars, outputs.
struct Walk {
  std::vector<const ir::Node*> order;            // one per instruction
  std::vector<int32_t> param_instr;              // per parameter slot
  std::vector<runtime::Buffer*> params;          // per parameter slot
  std::vector<const ir::Node*> scalars;          // per scalar slot
  std::vector<int32_t> slot;                     // per instruction
  std::vector<const ir::Node*> outputs;          // unique output roots
  std::vector<int32_t> output_instr;
  uint64_t structure_hash = 0;
  uint64_t epoch = 0;  // plain slots: params[i]->walk_slot == i while walk_epoch equals this
  std::vector<int64_t> param_offsets;                    // per parameter slot, in bytes
  std::vector<bool> windows;                             // per parameter slot
  std::unordered_set<runtime::Buffer*> fold;             // windows whose offsets go in the graph
  std::vector<std::pair<int32_t, int64_t>> folded;       // (instruction, view offset)
  std::vector<std::pair<const ir::Node*, size_t>> stack;  // walk()'s own, kept for its capacity

  // Empties every list and keeps its capacity.
  void clear() {
    order.clear();
    param_instr.clear();
    params.clear();
    scalars.clear();
    slot.clear();
    outputs.clear();
    output_instr.clear();
    structure_hash = epoch = 0;
    param_offsets.clear();
    windows.clear();
    fold.clear();
    folded.clear();
    stack.clear();
  }
};

// Window slots: one per (buffer, offset) read by windows at run-time offsets; plain slots are
// deduplicated by the buffer's walk fields.
struct SlotKey {
  runtime::Buffer* b;
  int64_t off;
  bool window;
  bool operator==(const SlotKey& o) const { return b == o.b && off == o.off && window == o.window; }
};
struct SlotKeyHash {
  size_t operator()(const SlotKey& k) const {
    return std::hash<const void*>()(k.b) ^ (std::hash<int64_t>()(k.off) * 0x9e3779b97f4a7c15ull) ^
           k.window;
  }
};

// Post-order over `roots`, sharing nodes (a DAG) and deduplicating parameters by buffer.
void walk(const char* op, Walk& w) {
  uint64_t epoch = ++walk_epoch_counter;
  w.epoch = epoch;
  std::unordered_map<SlotKey, int32_t, SlotKeyHash> window_slot;  // allocates only when used
  auto& stack = w.stack;
  stack.clear();
  uint64_t h = 0x6c617a7978ull;
  auto post = [&](const ir::Node* n) {
    if (n->op() == ir::Op::Parameter) {
      runtime::Buffer* b = n->buffer().get();
      if (n->buffer_version() != b->version()) {
        ir::fail(op, "internal: buffer " + std::to_string(b->id()) +
                         " was overwritten while a pending graph still read it (a donation "
                         "bug). Please report it with LAZYX_DEBUG=1 output.");
      }
      const bool window = n->is_window() && !w.fold.count(b);
      const int64_t off = window ? n->param_offset() : 0;
      int32_t idx = static_cast<int32_t>(w.order.size());
      if (window) {
        auto [it, fresh] = window_slot.emplace(SlotKey{b, off, true}, idx);
        if (!fresh) {
          n->walk_index = it->second;
          return;
        }
      } else {
        if (b->walk_epoch == epoch) {  // deduplicated by buffer
          n->walk_index = w.param_instr[b->walk_slot];
          return;
        }
        b->walk_epoch = epoch;
        b->walk_slot = static_cast<int32_t>(w.params.size());
      }
      w.windows.push_back(window);
      w.param_offsets.push_back(off * static_cast<int64_t>(dtype_size(n->dtype())));
      n->walk_index = idx;
      w.order.push_back(n);
      w.slot.push_back(static_cast<int32_t>(w.params.size()));
      w.param_instr.push_back(idx);
      w.params.push_back(b);
      h = ir::hash_combine(h, n->hash());
      return;
    }
    int32_t idx = static_cast<int32_t>(w.order.size());
    n->walk_index = idx;
    w.order.push_back(n);
    if (n->op() == ir::Op::Scalar) {
      w.slot.push_back(static_cast<int32_t>(w.scalars.size()));
      w.scalars.push_back(n);
    } else {
      w.slot.push_back(-1);
    }
    h = ir::hash_combine(h, n->hash());
    for (const auto& o : n->operands()) h = ir::hash_combine(h, static_cast<uint64_t>(o->walk_index));
    if (n->op() == ir::Op::AsStrided) {  // a window read at a compile-time offset after all
      const ir::Node* src = n->operand(0).get();
      if (src->op() == ir::Op::Parameter && src->is_window() && w.fold.count(src->buffer().get())) {
        w.folded.emplace_back(idx, src->param_offset());
        h = ir::hash_combine(h, static_cast<uint64_t>(src->param_offset()));
      }
    }
  };
  for (const ir::Node* root : w.outputs) {
    if (root->walk_epoch == epoch) continue;
    root->walk_epoch = epoch;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->operands().size()) {
        const ir::Node* c = n->operands()[next++].get();
        if (c->walk_epoch != epoch) {
          c->walk_epoch = epoch;
          stack.emplace_back(c, 0);
        }
        continue;
      }
      const ir::Node* done = n;
      stack.pop_back();
      post(done);
    }
  }
  for (const ir::Node* root : w.outputs) {
    w.output_instr.push_back(root->walk_index);
    h = ir::hash_combine(h, static_cast<uint64_t>(root->walk_index));
  }
  w.structure_hash = h;
}

backend::LoweredGraph lower(const Walk& w, const std::vector<int32_t>& donation) {
  backend::LoweredGraph g;
  g.instrs.reserve(w.order.size());
  for (size_t i = 0; i < w.order.size(); ++i) {
    const ir::Node* n = w.order[i];
    backend::Instr in{n->op(), n->dtype(), n->shape(), n->attrs(), {}, w.slot[i]};
    for (const auto& o : n->operands()) in.inputs.push_back(o->walk_index);
    g.instrs.push_back(std::move(in));
  }
  for (auto [i, off] : w.folded) g.instrs[i].attrs.i0 = off;
  g.outputs = w.output_instr;
  g.param_instr = w.param_instr;
  g.num_scalars = static_cast<int32_t>(w.scalars.size());
  g.donation = donation;
  return g;
}

// Writes out the parameters' detail lines (empty until someone reads them).
void render_details(StepReport& r, const std::vector<DetailText>& details) {
  for (size_t i = 0; i < r.params.size() && i < details.size(); ++i) {
    r.params[i].detail = details[i].render();
  }
}

void finish_report(StepReport& r, std::vector<DetailText>* details = nullptr) {
  if (&r == &report_slots[1 - last_slot]) {
    last_slot = 1 - last_slot;
  } else {
    last_report() = std::move(r);
  }
  last_details.clear();
  if (details) last_details.swap(*details);
}

// Buffers that are donated and also read through a window's own parameter slot.
std::unordered_set<runtime::Buffer*> donated_windows(const Walk& w, const DonationPlan& plan) {
  std::unordered_set<runtime::Buffer*> shifted, r;
  for (size_t p = 0; p < w.params.size(); ++p) {
    if (w.windows[p]) shifted.insert(w.params[p]);
  }
  if (shifted.empty()) return r;
  for (size_t p = 0; p < plan.donation.size(); ++p) {
    if (plan.donation[p] >= 0 && shifted.count(w.params[p])) r.insert(w.params[p]);
  }
  return r;
}

// Buffers read through a window's slot whose storage asked for user donation: their windows
// fold into the buffer's own slot first, so the donation rules see every read of it.
std::unordered_set<runtime::Buffer*> flagged_windows(const Walk& w) {
  std::unordered_set<runtime::Buffer*> win, r;
  for (size_t p = 0; p < w.params.size(); ++p) {
    if (w.windows[p]) win.insert(w.params[p]);
  }
  if (win.empty()) return r;
  for (Storage* s = Storage::first_live(); s; s = s->next_live()) {
    if (s->donate_flag() && s->data() && win.count(s->data().get())) r.insert(s->data().get());
  }
  return r;
}

// Clears a walk's results, keeping its roots and the buffers whose offsets it folds.
void reset_walk(Walk& w) {
  std::vector<const ir::Node*> outputs = std::move(w.outputs);
  std::unordered_set<runtime::Buffer*> fold = std::move(w.fold);
  w.clear();
  w.outputs = std::move(outputs);
  w.fold = std::move(fold);
}

// Lists a sync fills, kept per thread across steps so a cached step allocates almost nothing.
// A sync nested in another (none is expected, but a backend may read a value) takes a second set.
struct SyncScratch {
  Walk w;
  DonationInput din;
  backend::ExecArgs args;
  std::vector<runtime::BufferPtr> outputs;
  std::vector<char> donated_output;
  std::vector<ir::NodePtr> old;
  DonationPlan plan;

  // Empties every list, keeping capacity, when the lease ends.
  void clear() {
    w.clear();
    din.params.clear();
    din.param_nodes.clear();
    din.targets.clear();
    din.target_output.clear();
    din.target_passthrough.clear();
    din.output_bytes.clear();
    din.output_dtype.clear();
    din.output_tensor.clear();
    args.params.clear();
    args.param_offsets.clear();
    args.scalars.clear();
    args.outputs = nullptr;
    outputs.clear();  // drops the buffers' references: must run before the next step
    donated_output.clear();
    old.clear();
    plan.user_donated.clear();
  }
};

}  // namespace

void sync_storages(SyncKind kind, std::vector<Storage*> targets, const char* what) {
  EngineLock lock(engine_mutex());
  env::Snapshot env_once;
  const char* op = kind_name(kind);
  // Read before anything changes: an invalid value raises here, with every tensor as it was.
  const int debug_level = diag::level();
  const bool aliasing = env::flag("LAZYX_ENABLE_PARAM_ALIASING", true);
  metrics::Batch mb;  // this sync's counters and samples, applied together
  dist::on_sync_start(kind == SyncKind::MarkStep);
  if (kind == SyncKind::MarkStep) {
    mb.counter("MarkStep");
    targets.swap(spare_targets);
    targets.clear();
    for (Storage* s = Storage::first_live(); s; s = s->next_live()) {
      if (s->pending()) targets.push_back(s);
    }
  } else {
    std::sort(targets.begin(), targets.end(),
              [](Storage* a, Storage* b) { return a->id() < b->id(); });
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    targets.erase(std::remove_if(targets.begin(), targets.end(),
                                 [](Storage* s) { return !s->pending(); }),
                  targets.end());
  }
  std::vector<int64_t> kept_live = add_kept_live(kind, targets);
  DepthGuard depth;
  StepReport nested;
  StepReport& report = sync_depth == 1 ? next_report() : nested;
  report.kind = op;
  report.step = ++sync_counter;
  if (targets.empty()) {  // nothing to run: succeeds even on a dead backend
    report.backend = backend_name();
    finish_report(report);
    return;
  }
  backend::Backend& be = backend::active_backend(op);
  report.backend = be.name();
  // Raises in strict mode.
  const diag::SyncContext dctx = diag::begin_sync(kind, op, what, debug_level);
  report.cause = dctx.cause;

  // Outputs: one per distinct pending node; a target whose value is a bare parameter takes
  // that buffer as is, without running anything.
  runtime::ScratchLease<SyncScratch> lease;  // lists kept per thread across steps
  Walk& w = (*lease).w;
  DonationInput& din = (*lease).din;
  din.kind = kind;
  din.aliasing_enabled = aliasing;
  const uint64_t out_epoch = ++walk_epoch_counter;  // node scratch: walk_index = output index
  for (Storage* s : targets) {
    const ir::Node* n = s->pending_node().get();
    din.targets.push_back(s);
    if (n->op() == ir::Op::Parameter) {
      din.target_output.push_back(-1);
      din.target_passthrough.push_back(n->buffer().get());
      continue;
    }
    if (n->walk_epoch != out_epoch) {
      n->walk_epoch = out_epoch;
      n->walk_index = static_cast<int32_t>(w.outputs.size());
      w.outputs.push_back(n);
      din.output_bytes.push_back(static_cast<size_t>(n->numel()) * dtype_size(n->dtype()));
      din.output_dtype.push_back(n->dtype());
      din.output_tensor.push_back(s->id());
    }
    din.target_output.push_back(n->walk_index);
    din.target_passthrough.push_back(nullptr);
  }
  DonationPlan& plan = (*lease).plan;
  plan.reports = std::move(spare_params);  // decide_donation overwrites every field
  std::vector<ir::NodePtr> unread;
  for (;;) {
    walk(op, w);
    if (std::unordered_set<runtime::Buffer*> f = flagged_windows(w); !f.empty()) {
      w.fold.insert(f.begin(), f.end());
      reset_walk(w);
      continue;
    }
    // A storage overwritten without reading its old buffer (fill_, zero_, copy_ with a
    // conversion) may still write its new value into that buffer at a step barrier: the buffer
    // joins the program as an unread parameter, and the donation rules decide as for any other.
    if (kind == SyncKind::MarkStep && din.aliasing_enabled) {
      for (size_t t = 0; t < targets.size(); ++t) {
        runtime::Buffer* b = targets[t]->data().get();
        if (!b || din.target_output[t] < 0 || b->pinned() || b->holders() != 1) continue;
        if (b->walk_epoch == w.epoch) continue;  // already a parameter
        if (b->bytes() != din.output_bytes[din.target_output[t]]) continue;
        ir::NodePtr n =
            ir::Node::parameter(targets[t]->data(), targets[t]->shape(), targets[t]->dtype());
        n->walk_index = static_cast<int32_t>(w.order.size());
        b->walk_epoch = w.epoch;
        b->walk_slot = static_cast<int32_t>(w.params.size());
        w.slot.push_back(static_cast<int32_t>(w.params.size()));
        w.param_instr.push_back(n->walk_index);
        w.params.push_back(b);
        w.param_offsets.push_back(0);
        w.windows.push_back(false);
        w.order.push_back(n.get());
        w.structure_hash = ir::hash_combine(w.structure_hash, n->hash() ^ 0x756e72656164ull);
        unread.push_back(std::move(n));
      }
    }
    din.params = w.params;
    din.params_epoch = w.epoch;
    for (int32_t pi : w.param_instr) din.param_nodes.push_back(w.order[pi]);
    decide_donation(din, plan);
    // A window read at a run-time offset has a parameter slot of its own; if its buffer is
    // donated, walk again with that buffer's offsets in the graph, so every read of it is seen.
    std::unordered_set<runtime::Buffer*> fold = donated_windows(w, plan);
    if (fold.empty()) break;
    w.fold.insert(fold.begin(), fold.end());
    reset_walk(w);
    unread.clear();
    din.param_nodes.clear();
  }
  const bool collectives = dist::on_program(w.order);

  std::shared_ptr<CachedProgram> prog;
  if (!w.outputs.empty()) {
    uint64_t key = w.structure_hash;
    for (int32_t d : plan.donation) key = ir::hash_combine(key, static_cast<uint64_t>(d + 1));
    key = ir::hash_combine(key, std::hash<std::string>()(be.name()));
    report.graph_hash = key;
    prog = cache_lookup(key);
    if (prog && (prog->num_instrs != w.order.size() || prog->num_params != w.params.size() ||
                 prog->num_scalars != w.scalars.size() || prog->num_outputs != w.outputs.size())) {
      ir::fail(op, "internal: program cache key collision (graph " + std::to_string(key) +
                       "). Call clear_program_cache() and report this.");
    }
    report.cache_hit = prog != nullptr;
    if (prog) {
      mb.counter("CachedCompile");
    } else {
      auto t0 = std::chrono::steady_clock::now();
      auto p = std::make_shared<CachedProgram>();
      backend::LoweredGraph lowered = lower(w, plan.donation);
      report.compile_reason = diag::explain_compile(dctx, lowered, plan.reports, key);
      {
        ProfileSpan span("compile", "compile", report.compile_reason);
        p->program = be.compile(lowered);
      }
      p->backend = be.name();
      p->compile_ms = ms_since(t0);
      p->num_instrs = w.order.size();
      p->num_params = w.params.size();
      p->num_scalars = w.scalars.size();
      p->num_outputs = w.outputs.size();
      for (int32_t d : plan.donation) p->num_donated += d >= 0;
      mb.counter("UncachedCompile");
      mb.sample("CompileTime", p->compile_ms * 1e6);
      mb.sample("InputOutputAliasCount", static_cast<double>(p->num_donated));
      report.compile_ms = p->compile_ms;
      cache_insert(key, p);
      prog = std::move(p);
    }
  }

  // Run. Donated outputs start out holding their parameter's buffer.
  std::vector<runtime::BufferPtr>& outputs = (*lease).outputs;
  outputs.resize(w.outputs.size());
  for (size_t p = 0; p < plan.donation.size(); ++p) {
    if (plan.donation[p] >= 0) outputs[plan.donation[p]] = w.order[w.param_instr[p]]->buffer();
  }
  if (prog) {
    backend::ExecArgs& args = (*lease).args;
    args.params = w.params;
    args.param_offsets = w.param_offsets;
    args.scalars.reserve(w.scalars.size());
    for (const ir::Node* s : w.scalars) args.scalars.push_back({s->scalar_f(), s->scalar_i()});
    args.outputs = &outputs;
    if (collectives) dist::agree_on_program(op, report.graph_hash);  // every rank, same program
    auto t0 = std::chrono::steady_clock::now();
    {
      ProfileSpan span("execute", "execute");
      be.execute(*prog->program, args);  // on error nothing below runs: state is unchanged
    }
    report.execute_ms = ms_since(t0);
    report.ran_program = true;
    report.scratch_bytes = prog->program->scratch_bytes();
    report.scratch_reason = prog->program->scratch_reason();
    mb.counter("ExecuteComputation");
    mb.sample("ExecuteTime", report.execute_ms * 1e6);
    mb.sample("TensorsGraphSize", static_cast<double>(w.order.size()));
  }

  // Commit: donated buffers now hold new contents; storages take their outputs.
  for (size_t p = 0; p < plan.donation.size(); ++p) {
    if (plan.donation[p] >= 0) w.params[p]->bump_version();
  }
  std::vector<char>& donated_output = (*lease).donated_output;
  donated_output.assign(outputs.size(), 0);
  for (int32_t d : plan.donation) {
    if (d >= 0) donated_output[d] = 1;
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!donated_output[o]) report.bytes_allocated += static_cast<int64_t>(outputs[o]->bytes());
  }
  // Keep the old graphs alive until every storage is updated, so no buffer dies mid-commit.
  std::vector<ir::NodePtr>& old = (*lease).old;
  old.reserve(targets.size());
  for (size_t t = 0; t < targets.size(); ++t) {
    Storage* s = targets[t];
    old.push_back(s->pending_node());
    if (din.target_output[t] >= 0) {
      s->set_data(outputs[din.target_output[t]]);
    } else {
      s->set_data(old.back()->buffer());
    }
  }
  if (!plan.user_donated.empty()) {
    std::unordered_set<const Storage*> in_sync(targets.begin(), targets.end());
    for (Storage* s : plan.user_donated) {
      if (!in_sync.count(s)) s->mark_donated(report.step);
    }
  }
  old.clear();

  for (Storage* s : targets) report.materialized.push_back(s->id());
  report.kept_live = std::move(kept_live);
  report.num_nodes = static_cast<int64_t>(w.order.size());
  report.num_parameters = static_cast<int64_t>(w.params.size());
  report.num_scalars = static_cast<int64_t>(w.scalars.size());
  report.num_outputs = static_cast<int64_t>(w.outputs.size());
  report.params = std::move(plan.reports);
  if (debug_level >= 1) {  // the debug output shows them
    render_details(report, plan.details);
    plan.details.clear();
  }
  for (const auto& pr : report.params) {
    if (pr.donated) {
      report.num_donated++;
      report.donated_bytes += pr.bytes;
    }
  }
  diag::end_sync(dctx, report);
  finish_report(report, &plan.details);
  if (kind == SyncKind::MarkStep) spare_targets.swap(targets);
}

}  // namespace lazyx::graph

namespace lazyx {

void mark_step() {
  env::Snapshot env_once;
  const int64_t cache_limit = runtime::cache_limit_percent();  // raises before the step runs
  graph::sync_storages(graph::SyncKind::MarkStep, {});
  runtime::trim_cache(cache_limit);
}

void sync(const std::vector<Tensor>& tensors) {
  EngineLock lock(engine_mutex());
  std::vector<Storage*> targets;
  for (const Tensor& t : tensors) {
    const TensorImpl& i = impl_of("sync", t);
    i.storage()->check_not_donated("sync");
    targets.push_back(i.storage().get());
  }
  graph::sync_storages(graph::SyncKind::Sync, std::move(targets));
}

StepReport last_step() {
  EngineLock lock(engine_mutex());
  if (!graph::last_details.empty()) {
    graph::render_details(graph::last_report(), graph::last_details);
    graph::last_details.clear();
  }
  return graph::last_report();
}

bool set_buffer_donation(const Tensor& t, bool should_donate) {
  EngineLock lock(engine_mutex());
  const TensorImpl& i = impl_of("set_buffer_donation", t);
  Storage& s = *i.storage();
  if (!should_donate) {
    s.set_donate_flag(false);
    return false;
  }
  if (s.donated() || s.pending() || !s.data() || !i.is_identity()) return false;
  s.set_donate_flag(true);
  return true;
}

bool get_buffer_donation(const Tensor& t) {
  EngineLock lock(engine_mutex());
  return impl_of("get_buffer_donation", t).storage()->donate_flag();
}

bool is_donated(const Tensor& t) {
  EngineLock lock(engine_mutex());
  return impl_of("is_donated", t).storage()->donated();
}

}  // namespace lazyx
