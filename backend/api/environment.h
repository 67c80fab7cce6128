// The driver's view of the environment (passes/base/environment.h reads it): the names
// KILN_DISABLE may give, which are the pipeline's passes and the driver's features.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "passes/base/environment.h"

namespace kiln {

/// The names KILN_DISABLE accepts: the pipeline's passes and the features "freeze_weights",
/// "fusion", "llvm", "kernel_cache", "one_pass_moments" and "cuda".
std::vector<std::string> disable_names();

/// KILN_DISABLE's names; the first call warns about any that disable_names() does not list
/// (a typo must not stop a model).
const std::set<std::string>& disabled_names();

}  // namespace kiln
