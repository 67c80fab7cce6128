#include "backend/api/environment.h"

#include <algorithm>
#include <mutex>

#include "passes/base/strings.h"
#include "passes/pipeline.h"

namespace kiln {

std::vector<std::string> disable_names() {
  std::vector<std::string> names = pipeline_pass_names();
  names.push_back("freeze_weights");  // torch.compile inference: weights as constants
  names.push_back("fusion");
  names.push_back("llvm");
  names.push_back("kernel_cache");      // reuse of kernels earlier plans compiled (kernel_cache.h)
  names.push_back("one_pass_moments");  // a mean and its variance in one pass (moments.h)
  names.push_back("cuda");              // CUDA code generation (CUDA ops then run through ATen)
  names.push_back("shape_classes");     // one compile for every size of some dims (shape_classes.h)
  return names;
}

const std::set<std::string>& disabled_names() {
  const std::set<std::string>& disabled = environment().disabled;
  static std::once_flag checked;
  std::call_once(checked, [&] {
    const auto valid = disable_names();
    for (const auto& name : disabled) {
      if (std::find(valid.begin(), valid.end(), name) == valid.end())
        log(LogLevel::Warn,
            "KILN_DISABLE names '" + name + "', which is not one of: " + joined(valid));
    }
  });
  return disabled;
}

}  // namespace kiln
