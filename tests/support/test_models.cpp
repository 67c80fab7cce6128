#include "support/test_models.h"

#include <sstream>

namespace kiln::testing {

std::string model_path(const std::string& name) {
  return std::string(KILN_TEST_MODELS_DIR) + "/" + name + ".pt";
}

torch::jit::Module load_model(const std::string& name) {
  auto module = torch::jit::load(model_path(name));
  module.eval();
  return module;
}

std::string compare(const c10::IValue& actual, const c10::IValue& expected, double atol,
                    double rtol) {
  if (expected.isTensor()) {
    if (!actual.isTensor()) return "expected a tensor, got " + actual.tagKind();
    const at::Tensor& a = actual.toTensor();
    const at::Tensor& e = expected.toTensor();
    if (a.sizes() != e.sizes() || a.scalar_type() != e.scalar_type()) {
      std::ostringstream out;
      out << "expected " << e.scalar_type() << e.sizes() << ", got " << a.scalar_type()
          << a.sizes();
      return out.str();
    }
    if (!at::allclose(a, e, rtol, atol, /*equal_nan=*/true)) {
      std::ostringstream out;
      out << "values differ, max abs diff "
          << (a.to(at::kDouble) - e.to(at::kDouble)).abs().nan_to_num(0).max().item<double>();
      return out.str();
    }
    return "";
  }
  if (expected.isTuple() || expected.isList()) {
    auto items = [](const c10::IValue& v) {
      return v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    };
    if (!(actual.isTuple() || actual.isList()))
      return "expected a tuple or list, got " + actual.tagKind();
    auto a = items(actual), e = items(expected);
    if (a.size() != e.size())
      return "expected " + std::to_string(e.size()) + " items, got " + std::to_string(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      auto diff = compare(a[i], e[i], atol, rtol);
      if (!diff.empty()) return "item " + std::to_string(i) + ": " + diff;
    }
    return "";
  }
  if (actual != expected) return "expected " + expected.tagKind() + " value differs";
  return "";
}

}  // namespace kiln::testing
