// The graph executor: turns pending tensors into one program, donates, runs, and reports.
#pragma once

#include <string>
#include <vector>

#include "lazyx/step.h"
#include "runtime/buffer.h"
#include "tensor/tensor_impl.h"

namespace lazyx::graph {

enum class SyncKind { MarkStep, Sync, Read };

// Materializes `targets` (all live storages for MarkStep). On error nothing changes. `what`
// names a value read's op (item, to_vector, copy_to_host) for the sync's cause.
void sync_storages(SyncKind kind, std::vector<Storage*> targets, const char* what = nullptr);

// A partial sync's extra targets (keep_live.cpp): every live pending storage whose value the
// program computes anyway (never a bare parameter). Appends them to `targets` (re-sorted by id)
// and returns their ids; a no-op for mark_step or with LAZYX_KEEP_LIVE=0.
std::vector<int64_t> add_kept_live(SyncKind kind, std::vector<Storage*>& targets);

// Donation decisions (donation.cpp).
struct DonationInput {
  SyncKind kind;
  std::vector<runtime::Buffer*> params;   // per parameter slot
  uint64_t params_epoch = 0;              // params[i]->walk_slot == i while walk_epoch equals this
  std::vector<const ir::Node*> param_nodes;  // per parameter slot, for shape and dtype
  std::vector<Storage*> targets;          // storages this sync rewrites or assigns
  std::vector<int32_t> target_output;     // per target: its program output, -1 if pass-through
  std::vector<runtime::Buffer*> target_passthrough;  // per target: the buffer it takes as is
  std::vector<size_t> output_bytes;
  std::vector<Dtype> output_dtype;
  std::vector<int64_t> output_tensor;     // the first storage id of each output
  bool aliasing_enabled = true;
};

// A report's one-line detail, written out only when someone reads it (last_step(), debug
// output): a cached step then builds no strings. `{0}`..`{2}` in `text` stand for `args` (at
// most three).
struct DetailText {
  const char* text = "";
  int64_t args[3] = {0, 0, 0};
  std::string render() const;
};

// Where a parameter's buffer appears among the targets and the live storages.
struct BufferUse {
  std::vector<size_t> rewritten;         // target indices whose alias source is the buffer
  const Storage* passthrough = nullptr;  // a target taking the buffer as is
  const Storage* holder = nullptr;       // the first live storage holding it, for the report
  const Storage* flagged = nullptr;      // a holder flagged by set_buffer_donation
};

struct DonationPlan {
  std::vector<int32_t> donation;  // per parameter slot: output index or -1
  std::vector<ParamReport> reports;    // details empty: see `details`
  std::vector<DetailText> details;     // per parameter slot
  std::vector<Storage*> user_donated;  // flagged storages that give their buffer away
  // decide_donation's own lists, kept with the plan for their capacity.
  std::vector<char> output_taken, decided;
  std::vector<BufferUse> uses;
};

// Fills `plan`, reusing its vectors (a cached step then allocates nothing for it).
void decide_donation(const DonationInput& in, DonationPlan& plan);

// Program cache (program_cache.cpp): an LRU keyed by the graph key.
struct CachedProgram;
std::shared_ptr<CachedProgram> cache_lookup(uint64_t key);
void cache_insert(uint64_t key, std::shared_ptr<CachedProgram> p);

}  // namespace lazyx::graph
