// lazyx._C's diagnostics: debug output, strict mode, the timeline, and sync causes carrying the
// user's Python frames (the frames outside the lazyx package and torch).
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <memory>

#include "diag_bridge.h"

namespace py = pybind11;

namespace lazyx_bridge {
namespace {

// Folders whose frames are not the user's (set by the package when it loads).
std::vector<std::string>& skipped_folders() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

bool is_users(const std::string& file) {
  if (file.rfind("<frozen", 0) == 0) return false;
  for (const std::string& p : skipped_folders()) {
    if (file.compare(0, p.size(), p) == 0) return false;
  }
  return true;
}

// A `with` scope over lazyx::SyncCause (frames only when something would show them).
class CauseScope {
 public:
  explicit CauseScope(std::string what) : what_(std::move(what)) {}
  void enter() { scope_ = std::make_unique<PyCause>(what_); }
  void exit() { scope_.reset(); }

 private:
  std::string what_;
  std::unique_ptr<PyCause> scope_;
};

}  // namespace

std::vector<std::string> python_frames() {
  std::vector<std::string> out;
  if (!lazyx::sync_causes_wanted() || !Py_IsInitialized()) return out;
  const size_t max = static_cast<size_t>(lazyx::debug_max_frames());
  if (max == 0) return out;
  py::gil_scoped_acquire gil;  // kernels run with the GIL released
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f != nullptr && out.size() < max) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (file != nullptr && name != nullptr && is_users(file)) {
      out.push_back(std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f)) + " in " +
                    name);
    }
    PyErr_Clear();
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return out;
}

void register_diagnostics(py::module_& m) {
  m.def("set_debug", [](int level) { lazyx::set_debug(level); });
  m.def("debug_level", []() { return lazyx::debug_level(); });
  m.def("allow_sync", [](bool allowed) { lazyx::allow_sync(allowed); });
  m.def("sync_allowed", []() { return lazyx::sync_allowed(); });
  m.def("profile_begin", [](const std::string& path) { lazyx::profile_begin(path); });
  m.def("profile_end", []() {
    py::gil_scoped_release nogil;
    lazyx::profile_end();
  });
  m.def("profiling", []() { return lazyx::profiling(); });
  m.def("_set_skipped_folders",
        [](std::vector<std::string> folders) { skipped_folders() = std::move(folders); });
  m.def("_python_frames", []() { return python_frames(); });
  py::class_<CauseScope>(m, "_SyncCause")
      .def(py::init<std::string>())
      .def("__enter__", [](CauseScope& s) { s.enter(); })
      .def("__exit__", [](CauseScope& s, py::args) { s.exit(); });
}

}  // namespace lazyx_bridge
