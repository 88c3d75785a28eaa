// Step reports in words.
#include <cstdio>
#include <sstream>

#include "ir/shape_infer.h"
#include "lazyx/step.h"

namespace lazyx {

const char* alias_reason_name(AliasReason r) {
  switch (r) {
    case AliasReason::InPlaceUpdate: return "in-place update";
    case AliasReason::UserRequested: return "user requested";
    case AliasReason::NotUpdated: return "not updated";
    case AliasReason::PartialSync: return "partial sync";
    case AliasReason::CachedConstant: return "cached constant";
    case AliasReason::Shared: return "shared";
    case AliasReason::ReadElsewhere: return "read elsewhere";
    case AliasReason::NoMatchingOutput: return "no matching output";
    case AliasReason::Disabled: return "disabled";
  }
  return "?";
}

std::string StepReport::to_string() const {
  std::ostringstream os;
  char hash[32];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(graph_hash));
  os << "[lazyx] " << kind << " #" << step << " on " << backend << ": ";
  if (!ran_program) {
    os << "nothing to run\n";
    return os.str();
  }
  os << "graph " << hash << " (" << (cache_hit ? "cache hit" : "compiled") << "), " << num_nodes
     << " nodes, " << num_parameters << " parameters, " << num_scalars << " scalars, "
     << num_outputs << " outputs\n";
  if (!cause.empty()) os << "  cause: " << cause << "\n";
  if (!cache_hit) {
    os << "  compiled because: "
       << (compile_reason.empty() ? "first compile at this site" : compile_reason) << "\n";
  }
  os << "  donated " << num_donated << " of " << num_parameters << " parameters ("
     << donated_bytes << " bytes); allocated " << bytes_allocated << " bytes; "
     << (scratch_bytes >= 0 ? "scratch " + std::to_string(scratch_bytes) + " bytes; " : "")
     << "compile " << compile_ms << " ms, execute " << execute_ms << " ms\n";
  if (!kept_live.empty()) {
    os << "  kept live:";
    for (int64_t id : kept_live) os << " tensor " << id;
    os << " (computed by this program, held by handles)\n";
  }
  if (!scratch_reason.empty()) os << "  scratch copy: " << scratch_reason << "\n";
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamReport& p = params[i];
    os << "  param " << i << ": buffer " << p.buffer_id << " " << dtype_name(p.dtype)
       << ir::shape_str(p.shape) << " " << p.bytes << " B: "
       << (p.donated ? "donated" : "kept") << " (" << alias_reason_name(p.reason) << ": "
       << p.detail << ")\n";
  }
  return os.str();
}

}  // namespace lazyx
