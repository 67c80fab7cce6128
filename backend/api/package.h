// Packages (kiln::save, kiln::load in kiln/kiln.h): a compiled module in one file, with the
// machine code of the input signatures it compiled, so that another process compiles them
// without generating code (docs/packages.md). The file's bytes are package_file.h's.
#pragma once

#include <ATen/core/ivalue.h>

#include "kiln/kiln.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The inputs of a call as a package keeps them to compile their signature again: tensors as
/// their metadata (sizes, strides, dtype, device, requires_grad; no data), None, scalars,
/// strings and tuples or lists of those as they are. Nothing for inputs it cannot describe
/// (objects, dicts of tensors): that signature then compiles at its first call after a load.
/// With them, the global state a signature includes (grad mode, autocast), which a load sets
/// while it compiles that signature.
std::optional<c10::IValue> describe_for_package(const std::vector<c10::IValue>& inputs);

/// The bytes kiln::save writes for `compiled`.
std::string package_bytes(const CompiledModule& compiled);
/// kiln::load of a package's bytes (kept alive by the pointer as long as the module's code is
/// used); `name` says where they came from in messages.
CompiledModule load_package_bytes(std::shared_ptr<const std::string_view> bytes,
                                  const std::string& name);

}  // namespace kiln
