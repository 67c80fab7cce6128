// kiln::is_none: `x is None` for a tensor an op returned, decided when the graph runs. An op may
// return an undefined tensor (nn.MultiheadAttention's fused op, for weights nobody asked for),
// which Python sees as None; TorchScript's peephole folds `x is None` to false wherever x is typed
// Tensor, so backend/capture/keep_none_checks.h hands such checks to this op instead.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>

namespace kiln {
namespace {

bool is_none(const std::optional<at::Tensor>& x) {
  return !x.has_value() || !x->defined();
}

}  // namespace
}  // namespace kiln

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def("is_none(Tensor? x) -> bool", &kiln::is_none);
}
