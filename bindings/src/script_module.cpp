#include "bindings/src/script_module.h"

#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include "kiln/kiln.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

torch::jit::Module script_module_of(const py::object& module) {
  auto found = torch::jit::as_module(module);
  if (!found) {
    throw Error(
        ErrorKind::InvalidInput,
        "expected a torch.jit.ScriptModule (from torch.jit.script or torch.jit.trace), got " +
            py::str(py::type::of(module)).cast<std::string>());
  }
  return *found;
}

// forward's arguments, without self, checked and converted by forward's own schema.
std::vector<c10::IValue> inputs_for(const CompiledModule& compiled, const py::args& args,
                                    const py::kwargs& kwargs) {
  // Self is dropped: any value holds its place (original() of a loaded package is not read).
  torch::jit::Stack stack =
      torch::jit::createStackForSchema(compiled.forward_schema(), args, kwargs, c10::IValue());
  stack.erase(stack.begin());
  return stack;
}

}  // namespace

void bind_script_module(py::module_& m) {
  py::class_<CompiledModule>(m, "CompiledScriptModule")
      .def("__call__",
           [](const CompiledModule& compiled, const py::args& args, const py::kwargs& kwargs) {
             std::vector<c10::IValue> inputs = inputs_for(compiled, args, kwargs);
             c10::IValue result;
             {
               py::gil_scoped_release release;
               result = compiled.forward(std::move(inputs));
             }
             return torch::jit::toPyObject(std::move(result));
           })
      .def(
          "explain",
          [](const CompiledModule& compiled, const py::args& args, const py::kwargs& kwargs) {
            return compiled.explain(inputs_for(compiled, args, kwargs)).to_json();
          },
          "Where each op runs for these inputs, as JSON.")
      .def_property_readonly("num_specializations", &CompiledModule::num_specializations)
      .def_property_readonly("original", &CompiledModule::original)
      .def(
          "save",
          [](const CompiledModule& compiled, const std::string& path) {
            py::gil_scoped_release release;
            save(compiled, path);
          },
          "Writes the module, its options and compiled code to one file (kiln::save).")
      .def_property_readonly("options",
                             [](const CompiledModule& c) { return c.options().to_string(); });

  m.def(
      "load_package",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return load(path);
      },
      "A package kiln::save wrote, compiled from its code (kiln::load).");
  m.def(
      "compile_script",
      [](const py::object& module, const std::map<std::string, std::string>& options) {
        return compile(script_module_of(module), CompileOptions::from_map(options));
      },
      "Compiles a torch.jit.ScriptModule through kiln's TorchScript capture.");
}

}  // namespace kiln::python
