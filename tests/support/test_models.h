// Shared helpers of the LibTorch tests: the generated test models and result comparison.
#pragma once

#include <torch/script.h>

#include <string>

namespace kiln::testing {

/// The path of a model written by scripts/make_test_models.py.
std::string model_path(const std::string& name);
torch::jit::Module load_model(const std::string& name);

/// Tensors, tuples and lists, element by element: the same structure, shapes and dtypes, values
/// within atol + rtol * |expected| (nan equal to nan). Returns a description of the first
/// difference, or "" when equal.
std::string compare(const c10::IValue& actual, const c10::IValue& expected, double atol = 1e-5,
                    double rtol = 1e-5);

}  // namespace kiln::testing
