// What a region runs for one input signature: its compiled plan, or why it runs in the fallback,
// and the weights the plan holds as constants.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/api/compile_graph.h"

namespace kiln {

/// A weight the plan holds as a constant, as it was when compiled.
struct FrozenWeight {
  size_t input;
  at::Tensor tensor;  // keeps the TensorImpl alive, so its address identifies it
  int64_t version;
  const void* data;
};

struct RegionSpecialization {
  std::shared_ptr<const CompiledRegion> compiled;  // null: runs in the fallback
  std::string failure;  // why it runs in the fallback, as explain says it
  std::vector<FrozenWeight> frozen;
};

}  // namespace kiln
