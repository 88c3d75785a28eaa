// lazyx._C: the Python API over the engine (steps, donation, reports, memory, metrics).
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/extension.h>

#include "diag_bridge.h"
#include "kernels.h"

namespace py = pybind11;
using namespace lazyx_bridge;

namespace {

// lazyx.LazyxError, set when the module loads (owned by the static py::exception there).
PyObject* lazyx_error_type = nullptr;

// An engine error raised inside a kernel: torch's Python bindings (HANDLE_TH_ERRORS) raise a
// PyTorchError as its python_type(), and the autograd engine rethrows it unchanged.
struct OpError final : public torch::PyTorchError {
  using torch::PyTorchError::PyTorchError;
  PyObject* python_type() override {
    return lazyx_error_type != nullptr ? lazyx_error_type : PyExc_RuntimeError;
  }
};

std::vector<lazyx::Tensor> handles(const std::vector<at::Tensor>& ts) {
  std::vector<lazyx::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(lz_impl(t)->tensor());
  return out;
}

py::dict memory_stats_dict() {
  lazyx::MemoryStats s = lazyx::memory_stats();
  py::dict d;
  d["bytes_in_use"] = s.bytes_in_use;
  d["peak_bytes"] = s.peak_bytes;
  d["bytes_cached"] = s.bytes_cached;
  d["num_allocs"] = s.num_allocs;
  d["num_fresh_allocs"] = s.num_fresh_allocs;
  d["num_trimmed_bytes"] = s.num_trimmed_bytes;
  return d;
}

}  // namespace

namespace lazyx_bridge {
void register_dist_bindings(py::module_& m);  // dist_bindings.cpp
void register_c10d_kernels();                 // dist_bindings.cpp
void rethrow_op_error(const lazyx::Error& e) { throw OpError(e.what()); }
}  // namespace lazyx_bridge

PYBIND11_MODULE(_C, m) {
  m.doc() = "lazyx: a lazy tensor engine as PyTorch's Lazy device";
  // Kernels the installed torch refused (schema changes): one import error naming them all.
  std::string refused;
  for (const Registration& r : registrations()) {
    if (!r.error.empty()) refused += "\n  aten::" + r.name + ": " + r.error;
  }
  if (!refused.empty()) {
    throw py::import_error(
        "[lazyx] built for torch " LAZYX_TORCH_VERSION ", but the installed torch " +
        py::str(py::module_::import("torch").attr("__version__")).cast<std::string>() +
        " rejects these kernels' signatures; rebuild lazyx against it (scripts/build.sh):" +
        refused);
  }
  register_foreach_kernels();
  register_composite_kernels();
  register_dist_bindings(m);
  register_c10d_kernels();
  register_diagnostics(m);
  // The module's attribute keeps the type alive; no static Python object outlives the interpreter.
  lazyx_error_type = py::exception<lazyx::Error>(m, "LazyxError", PyExc_RuntimeError).ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lazyx::Error& e) {
      PyErr_SetString(lazyx_error_type, e.what());
    }
  });

  m.def("device_type", []() { return std::string("lazy"); });
  m.def("_registered_kernels", []() {
    std::vector<std::string> names;
    for (const Registration& r : registrations()) names.push_back(r.name);
    return names;
  });
  m.def("mark_step", []() {
    py::gil_scoped_release nogil;
    lazyx::mark_step();
  });
  m.def("sync", [](const std::vector<at::Tensor>& ts) {
    auto hs = handles(ts);
    py::gil_scoped_release nogil;
    lazyx::sync(hs);
  });
  m.def("set_buffer_donation", [](const at::Tensor& t, bool f) {
    return lazyx::set_buffer_donation(lz_impl(t)->tensor(), f);
  });
  m.def("get_buffer_donation",
        [](const at::Tensor& t) { return lazyx::get_buffer_donation(lz_impl(t)->tensor()); });
  m.def("is_donated", [](const at::Tensor& t) { return lazyx::is_donated(lz_impl(t)->tensor()); });
  m.def("tensor_id", [](const at::Tensor& t) { return lz_impl(t)->tensor().id(); });
  m.def("storage_base_id", [](const at::Tensor& t) {
    auto* st = dynamic_cast<LzStorage*>(lz_impl(t)->storage().unsafeGetStorageImpl());
    return st ? st->root.id() : lz_impl(t)->tensor().id();
  });
  m.def("is_pending", [](const at::Tensor& t) { return lz_impl(t)->tensor().is_pending(); });
  m.def("graph_text",
        [](const std::vector<at::Tensor>& ts) { return lazyx::graph_text(handles(ts)); });
  m.def("graph_dot",
        [](const std::vector<at::Tensor>& ts) { return lazyx::graph_dot(handles(ts)); });
  m.def("memory_stats", &memory_stats_dict);
  m.def("reset_peak_memory_stats", []() { lazyx::reset_peak_memory_stats(); });
  m.def("empty_cache", []() { lazyx::empty_cache(); });
  m.def("backend_name", []() { return lazyx::backend_name(); });
  m.def("backend_names", []() { return lazyx::backend_names(); });
  m.def("set_backend", [](const std::string& n) { lazyx::set_backend(n); });
  m.def("program_cache_size", []() { return lazyx::program_cache_size(); });
  m.def("clear_program_cache", []() { lazyx::clear_program_cache(); });
  m.def("wait_for_background_compiles", []() {
    py::gil_scoped_release release;
    lazyx::wait_for_background_compiles();
  });
  m.def("manual_seed", [](uint64_t s) { lazyx::manual_seed(s); });
  m.def("set_num_threads", [](int n) { lazyx::set_num_threads(n); });
  m.def("get_num_threads", []() { return lazyx::get_num_threads(); });
  m.def("get_max_threads", []() { return lazyx::get_max_threads(); });

  py::class_<lazyx::ParamReport>(m, "ParamReport")
      .def_readonly("buffer_id", &lazyx::ParamReport::buffer_id)
      .def_readonly("bytes", &lazyx::ParamReport::bytes)
      .def_readonly("shape", &lazyx::ParamReport::shape)
      .def_property_readonly(
          "dtype",
          [](const lazyx::ParamReport& p) { return std::string(lazyx::dtype_name(p.dtype)); })
      .def_readonly("donated", &lazyx::ParamReport::donated)
      .def_readonly("output_index", &lazyx::ParamReport::output_index)
      .def_readonly("output_tensor_id", &lazyx::ParamReport::output_tensor_id)
      .def_property_readonly("reason",
                             [](const lazyx::ParamReport& p) {
                               return std::string(lazyx::alias_reason_name(p.reason));
                             })
      .def_readonly("detail", &lazyx::ParamReport::detail)
      .def("__repr__", [](const lazyx::ParamReport& p) {
        return "<ParamReport buffer " + std::to_string(p.buffer_id) + " " +
               std::to_string(p.bytes) + " bytes " + (p.donated ? "donated" : "kept") + " (" +
               lazyx::alias_reason_name(p.reason) + ")>";
      });
  py::class_<lazyx::StepReport>(m, "StepReport")
      .def_readonly("kind", &lazyx::StepReport::kind)
      .def_readonly("step", &lazyx::StepReport::step)
      .def_readonly("graph_hash", &lazyx::StepReport::graph_hash)
      .def_readonly("ran_program", &lazyx::StepReport::ran_program)
      .def_readonly("cache_hit", &lazyx::StepReport::cache_hit)
      .def_readonly("num_nodes", &lazyx::StepReport::num_nodes)
      .def_readonly("num_parameters", &lazyx::StepReport::num_parameters)
      .def_readonly("num_scalars", &lazyx::StepReport::num_scalars)
      .def_readonly("num_outputs", &lazyx::StepReport::num_outputs)
      .def_readonly("num_donated", &lazyx::StepReport::num_donated)
      .def_readonly("donated_bytes", &lazyx::StepReport::donated_bytes)
      .def_readonly("params", &lazyx::StepReport::params)
      .def_readonly("materialized", &lazyx::StepReport::materialized)
      .def_readonly("kept_live", &lazyx::StepReport::kept_live)
      .def_readonly("compile_ms", &lazyx::StepReport::compile_ms)
      .def_readonly("execute_ms", &lazyx::StepReport::execute_ms)
      .def_readonly("bytes_allocated", &lazyx::StepReport::bytes_allocated)
      .def_readonly("scratch_bytes", &lazyx::StepReport::scratch_bytes)
      .def_readonly("scratch_reason", &lazyx::StepReport::scratch_reason)
      .def_readonly("backend", &lazyx::StepReport::backend)
      .def_readonly("cause", &lazyx::StepReport::cause)
      .def_readonly("compile_reason", &lazyx::StepReport::compile_reason)
      .def("to_string", &lazyx::StepReport::to_string)
      .def("__str__", &lazyx::StepReport::to_string)
      .def("__repr__", [](const lazyx::StepReport& r) {
        return "<StepReport " + r.kind + " step " + std::to_string(r.step) + ": " +
               std::to_string(r.num_donated) + " of " + std::to_string(r.num_parameters) +
               " parameters donated>";
      });
  m.def("last_step", []() { return lazyx::last_step(); });

  // metrics
  m.def("metrics_counter_names", []() { return lazyx::metrics::counter_names(); });
  m.def("metrics_counter_value", [](const std::string& n) -> py::object {
    auto v = lazyx::metrics::counter_value(n);
    if (!v) return py::none();
    return py::int_(*v);
  });
  m.def("metrics_metric_names", []() { return lazyx::metrics::metric_names(); });
  m.def("metrics_metric_data", [](const std::string& n) -> py::object {
    auto d = lazyx::metrics::metric_data(n);
    if (!d) return py::none();
    return py::make_tuple(d->total_samples, d->accumulator, d->samples);
  });
  m.def("metrics_report", []() { return lazyx::metrics::metrics_report(); });
  m.def("metrics_clear_all", []() { lazyx::metrics::clear_all(); });
  m.def("metrics_clear_counters", []() { lazyx::metrics::clear_counters(); });
  m.def("metrics_clear_metrics", []() { lazyx::metrics::clear_metrics(); });
}
