// The TorchScript path from Python: kiln._C.compile_script(scripted, options) compiles a
// torch.jit.ScriptModule through kiln::compile (the C++ capture), and returns a callable.
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

void bind_script_module(pybind11::module_& m);

}  // namespace kiln::python
