// assign_layout's type inference (backend/api/run_node.h: infer_types): the types a node really
// returns, where a large batch runs at two small ones, against the op run at the full batch.
#include "backend/api/run_node.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

ir::TensorType type_of(const at::Tensor& t) {
  ir::TensorType type;
  type.sizes = t.sizes().vec();
  type.strides = t.strides().vec();
  return type;
}

// `op` on `inputs` (attributes `attrs`) as a one-node graph whose output is typed as `result`,
// the op's output at the full batch: infer_types must give `result`'s sizes and strides, from
// runs at small batches where `small` says so.
void expect_inferred(const char* op, const std::vector<at::Tensor>& inputs, ir::AttrList attrs,
                     const at::Tensor& result, bool small) {
  ir::Graph graph;
  std::vector<ir::Value*> values;
  std::vector<ir::TensorType> types;
  for (const at::Tensor& t : inputs) {
    types.push_back(type_of(t));
    values.push_back(graph.add_input(types.back()));
  }
  ir::TensorType declared = type_of(result);
  declared.strides = at::empty(result.sizes()).strides().vec();  // what the pass is to find out
  ir::Node* node = graph.append(op, values, {declared}, std::move(attrs));
  EXPECT_EQ(types_from_small_batches(*node, types, at::kCPU).has_value(), small) << op;
  const auto inferred = infer_types(*node, types, at::kCPU);
  ASSERT_TRUE(inferred) << op;
  ASSERT_EQ(inferred->size(), 1u);
  EXPECT_EQ(inferred->at(0).sizes, result.sizes().vec()) << op;
  EXPECT_EQ(inferred->at(0).strides, result.strides().vec()) << op;
}

TEST(InferTypes, ALargeBatchIsInferredAsTheOpReturnsIt) {
  constexpr auto kNhwc = at::MemoryFormat::ChannelsLast;
  const at::Tensor x = at::zeros({16, 8, 10, 10}).contiguous(kNhwc);
  const at::Tensor w = at::zeros({4, 8, 3, 3});
  const ir::AttrList conv = {{"bias", ir::NoneAttr{}},
                             {"stride", std::vector<int64_t>{1, 1}},
                             {"padding", std::vector<int64_t>{1, 1}},
                             {"dilation", std::vector<int64_t>{1, 1}},
                             {"groups", int64_t{1}}};
  // Channels last in, channels last out (at small batches, the same strides).
  expect_inferred("aten::conv2d", {x, w}, conv, at::conv2d(x, w, {}, 1, 1), true);
  expect_inferred("aten::conv2d", {x.contiguous(), w}, conv,
                  at::conv2d(x.contiguous(), w, {}, 1, 1), true);
  // A weight that leads with the batch by chance (16 output channels): the small runs do not
  // give the declared sizes, so the node runs at its own batch.
  const at::Tensor w16 = at::zeros({16, 8, 3, 3});
  expect_inferred("aten::conv2d", {x, w16}, conv, at::conv2d(x, w16, {}, 1, 1), false);
  // An attribute holding the batch (a view's shape): the small runs fail, the full one does not.
  expect_inferred("aten::view", {x.contiguous()}, {{"size", std::vector<int64_t>{16, -1}}},
                  x.contiguous().view({16, -1}), false);
  // A batch that is not the outermost dim of the input: run at its own batch.
  const at::Tensor inner = at::zeros({32, 16}).t();  // [16, 32], batch stride 1
  expect_inferred("aten::relu", {inner}, {}, at::relu(inner), false);
  // Elementwise over the batch: strides that do not depend on it.
  expect_inferred("aten::relu", {x}, {}, at::relu(x), true);
}

}  // namespace
}  // namespace kiln
