// kiln._C: the Python face of kiln's C++ library. Everything Python needs goes through here:
// options (validated by the C++ CompileOptions), FX regions, the TorchScript path, the counters.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <map>

#include "backend/api/introspection.h"
#include "backend/api/precision.h"
#include "bindings/src/fx_program.h"
#include "bindings/src/script_module.h"
#include "kiln/cache.h"
#include "kiln/error.h"
#include "kiln/options.h"
#include "kiln/profile.h"
#include "kiln/stats.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// kiln::Error -> kiln.KilnError(message, kind); ValueError for the caller's mistakes.
void translate_errors(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    py::object cls = py::module_::import("kiln._errors").attr("KilnError");
    py::object instance = cls(e.what(), error_kind_name(e.kind()));
    PyErr_SetObject(cls.ptr(), instance.ptr());
  }
}

py::dict stats_dict() {
  Stats s = stats();
  py::dict d;
  d["specializations"] = s.specializations;
  d["kernels"] = s.kernels;
  d["reused_kernels"] = s.reused_kernels;
  d["extern_steps"] = s.extern_steps;
  d["fallbacks"] = s.fallbacks;
  d["compile_seconds"] = s.compile_seconds;
  d["frozen_weights"] = s.frozen_weights;
  d["unfrozen_regions"] = s.unfrozen_regions;
  d["shape_classes"] = s.shape_classes;
  d["class_plans"] = s.class_plans;
  d["shared_constant_bytes"] = s.shared_constant_bytes;
  d["disk_cache_hits"] = s.disk_cache_hits;
  d["disk_cache_misses"] = s.disk_cache_misses;
  d["modules_compiled"] = s.modules_compiled;
  d["modules_loaded"] = s.modules_loaded;
  d["graphs_loaded"] = s.graphs_loaded;
  return d;
}

CompileOptions options_from(const std::map<std::string, std::string>& values) {
  return CompileOptions::from_map(values);
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_C, m) {
  using namespace kiln;
  using namespace kiln::python;
  m.doc() = "kiln's C++ library";
  py::register_exception_translator(&translate_errors);

  m.def(
      "normalize_options",
      [](const std::map<std::string, std::string>& values) {
        return options_from(values).to_string();
      },
      "Validates options given as strings; returns them in kiln's 'key=value,...' form.");
  m.def("option_keys", [] { return CompileOptions::keys(); });
  m.def("stats", &stats_dict);
  m.def(
      "cache_info",
      [] {
        const CacheInfo info = cache_info();
        py::dict d;
        d["dir"] = info.dir;
        d["enabled"] = info.enabled;
        d["why_disabled"] = info.why_disabled;
        d["entries"] = info.entries;
        d["bytes"] = info.bytes;
        d["max_bytes"] = info.max_bytes;
        return d;
      },
      "The disk cache of compiled code: its directory, whether it is on (and why not), entries, "
      "bytes and cap.");
  m.def("clear_cache", &clear_cache, "Deletes every entry of the disk cache.");
  m.def("reset_stats", &reset_stats);
  m.def("op_problem", &operator_problem,
        "Why kiln cannot compile this operator (\"aten::add.Tensor\"), or None.");

  m.def("pass_names", &pass_names, "The pass pipeline in order; each name works in KILN_DISABLE.");
  m.def(
      "cuda_status",
      [] {
        const CudaStatus status = cuda_status();
        return std::map<std::string, std::string>{
            {"nvrtc", status.nvrtc_library},
            {"nvrtc_version", std::to_string(status.nvrtc_version)},
            {"unavailable", status.unavailable_reason}};
      },
      "CUDA code generation here: the NVRTC library in use, its version (major * 1000 + minor * "
      "10), and why kiln cannot generate CUDA kernels (\"\" when it can).");
  m.def("start_profiling", &start_profiling,
        "Opens a profiling session: every plan step that runs is timed (kiln.profile).");
  m.def(
      "finish_profiling",
      [](int calls, double call_ms, int rows) {
        const Profile profile = finish_profiling(calls, call_ms);
        return std::make_pair(profile.to_json(), profile.to_text(rows));
      },
      py::arg("calls"), py::arg("call_ms"), py::arg("rows") = 25,
      "Closes the session: (JSON, text) of the per-step times, per call of `calls`.");
  m.def("native_bf16", &native_bf16,
        "Whether precision=bf16 multiplies in bf16 on this CPU (AVX512-BF16 or AMX; "
        "KILN_NATIVE_BF16 overrides).");
  m.def("build_id", &build_id, "This build of kiln's library (its GNU build ID).");
  m.def(
      "load_cache_entry",
      [](const std::string& key) -> py::object {
        std::optional<std::string> bytes;
        {
          py::gil_scoped_release unlocked;
          bytes = load_cache_entry(key);
        }
        if (!bytes) return py::none();
        return py::bytes(*bytes);
      },
      "The disk cache's entry under `key` (32 lowercase hex digits), or None.");
  m.def(
      "store_cache_entry",
      [](const std::string& key, py::bytes bytes) {
        std::string_view view(bytes);
        py::gil_scoped_release unlocked;
        store_cache_entry(key, view);
      },
      "Stores bytes in the disk cache under `key` (32 lowercase hex digits).");
  m.def("native_ops", &native_ops,
        "The operators kiln generates kernels for (\"aten::add.Tensor\", ...).");

  py::class_<FxProgram, std::shared_ptr<FxProgram>>(m, "FxProgram")
      .def(py::init<int64_t>())
      .def("constant", &FxProgram::constant)
      .def("call", &add_call)
      .def("set_outputs", &FxProgram::set_outputs);

  py::class_<RegionRunner, std::shared_ptr<RegionRunner>>(m, "Region")
      .def(py::init([](std::shared_ptr<FxProgram> program,
                       const std::map<std::string, std::string>& options, const std::string& name,
                       py::object fallback, std::vector<size_t> weights,
                       std::vector<std::vector<int>> symbolic_dims, const py::list& derived_dims,
                       const py::list& stride_dims) {
             return make_fx_region(
                 std::move(program), options_from(options), name, std::move(fallback),
                 std::move(weights),
                 declared_sizes(std::move(symbolic_dims), derived_dims, stride_dims));
           }),
           py::arg("program"), py::arg("options"), py::arg("name"), py::arg("fallback"),
           py::arg("weights") = std::vector<size_t>{},
           py::arg("symbolic_dims") = std::vector<std::vector<int>>{},
           py::arg("derived_dims") = py::list(), py::arg("stride_dims") = py::list())
      .def(
          "run",
          [](const RegionRunner& runner, const std::vector<at::Tensor>& inputs) {
            py::gil_scoped_release release;
            return runner.run(inputs);
          },
          "Runs the region (compiling a specialization for a new input signature).")
      .def("explain",
           [](const RegionRunner& runner) {
             Explanation explanation;
             runner.explain_into(explanation);
             explanation.tally();
             return explanation.to_json();
           })
      .def_property_readonly("num_specializations", &RegionRunner::num_specializations);

  bind_script_module(m);
}
