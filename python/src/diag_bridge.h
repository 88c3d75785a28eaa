// Sync causes from the PyTorch device: the user's Python frames attached to the syncs that value
// reads, CPU fallback ops and the Python API trigger (diag_bindings.cpp).
#pragma once

#include <lazyx/lazyx.h>

#include <string>
#include <vector>

namespace lazyx_bridge {

// The calling thread's Python frames outside lazyx and torch, innermost first, as
// "file:line in function" (at most LAZYX_DEBUG_MAX_FRAMES); empty unless debug output, strict
// mode or a profile would show them.
std::vector<std::string> python_frames();

// Names why the calling thread syncs while it lives, with the user's Python frames.
struct PyCause : lazyx::SyncCause {
  explicit PyCause(std::string what) : lazyx::SyncCause(std::move(what), python_frames()) {}
};

}  // namespace lazyx_bridge

namespace pybind11 {
class module_;
}
namespace lazyx_bridge {
// Registers set_debug, allow_sync, profile_begin/end and the cause scopes on lazyx._C.
void register_diagnostics(pybind11::module_& m);
}  // namespace lazyx_bridge
