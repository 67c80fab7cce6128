// The Python face of kiln's FX frontend (backend/fx/fx_program.h): kiln/_fx.py hands over each
// call's arguments as tagged Python tuples, decoded here against the operator's schema; a region
// runs the program, and the FX graph itself, run eagerly, is its fallback.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/api/region.h"
#include "backend/fx/fx_program.h"

namespace kiln::python {

/// Appends a call of `op` ("aten::add.Tensor") to `program`. `args` has one entry per schema
/// argument: ("ref", id), ("refs", [ids]) for a Tensor[] argument (or a Tensor?[] one, whose None
/// elements are None), ("const", value), ("default", None), or a size computed from the sizes of
/// graph values: ("size", program) for an int argument, ("sizes", [program, ...]) for an int[]
/// one (SizeExpression). Returns the references of its outputs. Throws kiln::Error (unsupported)
/// for ops and arguments kiln cannot compile.
std::vector<int64_t> add_call(FxProgram& program, const std::string& op,
                              const pybind11::list& args);

/// The symbolic sizes of a region's inputs as kiln/_sizes.py's symbolic_dims gives them: per
/// input and dim a symbol, -1 or -2; (input, dim, program) per derived dim; (input, [program per
/// dim]) per input with symbolic strides.
DeclaredSizes declared_sizes(std::vector<std::vector<int>> symbols, const pybind11::list& derived,
                             const pybind11::list& strides);

std::shared_ptr<RegionRunner> make_fx_region(std::shared_ptr<const FxProgram> program,
                                             const CompileOptions& options, const std::string& name,
                                             pybind11::object fallback,
                                             std::vector<size_t> weights = {},
                                             DeclaredSizes declared_sizes = {});

}  // namespace kiln::python
