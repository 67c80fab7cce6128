// Which input signatures one shape class serves: the same inputs as the signature it was formed
// from (dtypes, devices, ranks, requires_grad, the same weights, grad mode and autocast), but
// that some dims, its size inputs, take any value of at least 2. A size input is a set of dims
// that move together (a batch of the input ids and of the attention mask); each tensor that has
// one stays dense in its dim order (contiguous, channels-last, ...), so its strides follow, but
// along dims it is expanded over (stride 0: the one-element tensor a torch.compile region reads
// a size from).
// dynamo likewise specializes sizes 0 and 1, which change what broadcasts.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/api/signature.h"
#include "backend/capture/size_expression.h"

namespace kiln {

struct ShapeClass {
  /// Per size input: the (input, dim) pairs it is read from.
  std::vector<std::vector<std::pair<size_t, int>>> size_inputs;
  /// Per size input (empty: all 1 and 0): its dims are `step * value + offset` long. An image
  /// through strided convolutions has sizes that are polynomials of its height only over heights
  /// one stride product apart (a ResNet's 224, 256, 288: 7, 8, 9 at its last stage), so its
  /// class's size input counts those (choose_steps in shape_classes.cpp).
  std::vector<int64_t> steps;
  std::vector<int64_t> offsets;
  struct Input {
    bool defined = false;
    at::ScalarType dtype = at::kFloat;
    c10::Device device = c10::Device(c10::DeviceType::CPU);
    bool requires_grad = false;
    std::vector<int64_t> sizes;    // at the class's base binding
    std::vector<int64_t> strides;  // likewise
    std::vector<int> dim_order;    // outermost first: the order its strides follow
    std::vector<int> size_input;   // per dim: the size input it is, or -1
    /// Dims (size_input -1) whose size is an expression of size inputs: a flattened batch
    /// (`s0 * s1`), a cache one longer (`s0 + 1`). The expression's kDim tokens read size input
    /// `a`'s dims (their length: `step * value + offset`).
    std::vector<std::pair<int, SizeExpression>> derived;
    /// Per dim, where the graph declares strides that are not dense in the dim order (q of a
    /// fused qkv projection: [b, n, 128] with strides [384 n, 384, 1]): each an expression of
    /// size inputs, as `derived`'s. Empty for dense inputs.
    std::vector<SizeExpression> stride_terms;
    std::vector<bool> broadcast;  // per dim: stride 0 over more than one element (expanded)
    const c10::TensorImpl* weight = nullptr;  // a frozen weight: this very tensor
  };
  std::vector<Input> inputs;
  SignatureKey global_state;  // grad mode and autocast (signature_of of no inputs)
};

/// What a class needs to know of a signature's inputs (no data is kept; `weights`: the inputs
/// frozen as constants, matched by identity).
std::vector<ShapeClass::Input> describe(const std::vector<at::Tensor>& inputs,
                                        const std::vector<size_t>& weights);

/// The class inputs like `earlier` and `now` form, at `now`'s binding: the dims where they
/// differ become size inputs (dims that move from the same value to the same value together are
/// one). None when they differ otherwise, a moved dim is below 2 at `now`, or a tensor with a
/// moved dim is not dense. Weights never move.
std::optional<ShapeClass> form_class(const std::vector<ShapeClass::Input>& earlier,
                                     const std::vector<at::Tensor>& now,
                                     const std::vector<size_t>& weights,
                                     std::string* why_not = nullptr);

/// The symbolic sizes a graph declares for its inputs (torch.compile's dynamic dims).
struct DeclaredSizes {
  /// Per input, per dim: the symbol it is (dims of one symbol move together), -1 for a static
  /// dim, -2 for one derived from symbols (`derived`).
  std::vector<std::vector<int>> symbols;
  struct Derived {
    size_t input = 0;
    int dim = 0;
    SizeExpression size;  // its kDim tokens read symbol `a`
  };
  std::vector<Derived> derived;
  /// An input's strides, one expression per dim (kDim tokens read symbols, as `derived`'s).
  struct Strides {
    size_t input = 0;
    std::vector<SizeExpression> strides;
  };
  std::vector<Strides> strides;
  bool empty() const { return symbols.empty(); }
};

/// The class whose size inputs the graph declares (`declared`). None (and why) when a symbolic
/// dim is below 2 now, a derived one is not its expression's value, a tensor with either is
/// neither dense nor strided as declared, or is a weight.
std::optional<ShapeClass> declare_class(const std::vector<at::Tensor>& now,
                                        const std::vector<size_t>& weights,
                                        const DeclaredSizes& declared,
                                        std::string* why_not = nullptr);

/// `shape_class` with size input `drop` made part of size input `keep` (both at one size now):
/// dims the graph gave symbols of their own that must move together (a frame's labels and
/// logits after a graph break). Steps and offsets, where set, are `keep`'s.
void merge_size_inputs(ShapeClass& shape_class, size_t keep, size_t drop);

/// The binding of `inputs` in `shape_class`, or none when they are not a member.
std::optional<std::vector<int64_t>> binding_of(const ShapeClass& shape_class,
                                               const std::vector<at::Tensor>& inputs);

/// The class's base binding.
std::vector<int64_t> base_binding(const ShapeClass& shape_class);

/// The sizes of the dims each size input stands for at `binding` (the binding itself where every
/// step is 1).
std::vector<int64_t> dim_sizes(const ShapeClass& shape_class, std::span<const int64_t> binding);

/// Inputs like `inputs` (members of the class) at another binding: the tensors with a size
/// input are new, uninitialized, dense in their dim order (what an import reads is their
/// metadata); the others are `inputs`' own.
std::vector<at::Tensor> inputs_at(const ShapeClass& shape_class,
                                  const std::vector<at::Tensor>& inputs,
                                  std::span<const int64_t> binding);

}  // namespace kiln
