// Steps: running pending work, donation, and what each sync reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazyx/tensor.h"

namespace lazyx {

// The step barrier: syncs every live tensor and donates what ALIASING.md allows.
void mark_step();
// A partial sync of `tensors` (and the bases of views among them). Never donates on its own;
// only buffers the user flagged with set_buffer_donation.
void sync(const std::vector<Tensor>& tensors);

// Rule 3: the user promises not to read t's current value again. Returns whether the flag is
// now set: false for a tensor without a buffer of its own (pending, or a view into a base).
bool set_buffer_donation(const Tensor& t, bool should_donate);
bool get_buffer_donation(const Tensor& t);
bool is_donated(const Tensor& t);

// Why a parameter buffer was donated or kept.
enum class AliasReason : uint8_t {
  InPlaceUpdate,    // donated: the buffer is the output tensor's alias source
  UserRequested,    // donated: set_buffer_donation
  NotUpdated,       // kept: a tensor that this sync does not rewrite still holds it
  PartialSync,      // kept: partial syncs never donate on their own (rule 2)
  CachedConstant,   // kept: owned by the constant cache (rule 1c)
  Shared,           // kept: another tensor holds it as its value (rule 1c)
  ReadElsewhere,    // kept: a pending graph outside this sync still reads it (rule 1b)
  NoMatchingOutput, // kept: no output of the same byte size and dtype (rule 1d)
  Disabled,         // kept: LAZYX_ENABLE_PARAM_ALIASING=0
};
const char* alias_reason_name(AliasReason r);

struct ParamReport {
  int64_t buffer_id = 0;
  int64_t bytes = 0;
  Shape shape;
  Dtype dtype = kFloat32;
  bool donated = false;
  int64_t output_index = -1;     // the output written into this buffer, when donated
  int64_t output_tensor_id = -1; // the tensor that output belongs to
  AliasReason reason = AliasReason::NotUpdated;
  std::string detail;  // one line in words
};

struct StepReport {
  std::string kind;  // "mark_step", "sync" or "read"
  int64_t step = 0;  // sequence number of this sync
  uint64_t graph_hash = 0;
  bool ran_program = false;
  bool cache_hit = false;
  int64_t num_nodes = 0;
  int64_t num_parameters = 0;
  int64_t num_scalars = 0;
  int64_t num_outputs = 0;
  int64_t num_donated = 0;
  int64_t donated_bytes = 0;
  std::vector<ParamReport> params;
  // Tensors (storage ids) this sync materialized, and those of them it kept although the sync
  // did not ask for them: live tensors whose values its program computed anyway.
  std::vector<int64_t> materialized;
  std::vector<int64_t> kept_live;
  double compile_ms = 0;
  double execute_ms = 0;
  int64_t bytes_allocated = 0;  // new output buffers (donated outputs allocate nothing)
  int64_t scratch_bytes = -1;   // the program's arena for intermediates; -1: not planned
  // Why a donated tensor's new value went through a temporary as large as the tensor (the op,
  // and what still read the old value), or "" when every donated update ran in its buffer.
  std::string scratch_reason;
  std::string backend;
  std::string cause;           // why it synced: "user mark_step", "value read by item()", ...
  std::string compile_reason;  // when it compiled: what differs from the nearest program
                               // compiled at the same site ("" for the site's first compile)
  std::string to_string() const;
};

// The report of the most recent sync (mark_step, sync or value read).
StepReport last_step();

}  // namespace lazyx
