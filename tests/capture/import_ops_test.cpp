// OpImporter: what later ops see of a factory's output, and errors that are not c10's.
#include "backend/capture/import_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "kiln/error.h"

namespace kiln {
namespace {

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

RunOp boxed(c10::OperatorHandle handle) {
  return [handle](torch::jit::Stack& stack) { handle.callBoxed(stack); };
}

// The devices of the tensors an op was run on, in stack order.
RunOp recording(c10::OperatorHandle handle, std::vector<c10::Device>& devices) {
  return [handle, &devices](torch::jit::Stack& stack) {
    for (const c10::IValue& v : stack)
      if (v.isTensor()) devices.push_back(v.toTensor().device());
    handle.callBoxed(stack);
  };
}

TEST(OpImporter, LaterOpsSeeAFactorysOutputOnMeta) {
  // arange(3, device=cpu) runs on the CPU even in the meta run; a backward graph then mixes it
  // with meta values (select_backward: `where(arange(3).view(-1, 1) == i, grad, zeros)`), which
  // a meta kernel written in Python rejects ("Tensor on device meta is not on the expected device
  // cpu"), and the region could not compile.
  OpImporter importer({at::randn({3, 4})});
  const auto arange = op("aten::arange", "");
  auto range = importer.add_op(arange.schema(), boxed(arange),
                               {c10::IValue(int64_t{3}), c10::IValue(), c10::IValue(),
                                c10::IValue(c10::Device(c10::kCPU)), c10::IValue()});
  const auto view = op("aten::view", "");
  auto column = importer.add_op(view.schema(), boxed(view),
                                {range.at(0), c10::IValue(std::vector<int64_t>{3, 1})});
  const auto mul = op("aten::mul", "Tensor");
  std::vector<c10::Device> devices;
  auto product =
      importer.add_op(mul.schema(), recording(mul, devices), {importer.input(0), column.at(0)});
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_TRUE(devices[0].is_meta());
  EXPECT_TRUE(devices[1].is_meta());
  EXPECT_EQ(product.at(0)->type().sizes, (std::vector<int64_t>{3, 4}));
}

TEST(OpImporter, AnErrorThatIsNotC10sIsRetriedOnZerosThenReported) {
  const auto relu = op("aten::relu", "");
  // Fails on meta tensors only, as a Python meta kernel's exception would.
  RunOp meta_fails = [relu](torch::jit::Stack& stack) {
    if (stack.at(0).toTensor().device().is_meta()) throw std::runtime_error("no meta kernel");
    relu.callBoxed(stack);
  };
  OpImporter cpu({at::randn({2, 5})});
  auto out = cpu.add_op(relu.schema(), meta_fails, {cpu.input(0)});
  EXPECT_EQ(out.at(0)->type().sizes, (std::vector<int64_t>{2, 5}));

  RunOp always_fails = [](torch::jit::Stack&) { throw std::runtime_error("broken op"); };
  OpImporter again({at::randn({2, 5})});
  try {
    again.add_op(relu.schema(), always_fails, {again.input(0)});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find(
                  "cannot infer the output shapes of aten::relu (on f32[2,5]): broken op"),
              std::string::npos)
        << e.what();
  }
}

TEST(OpImporter, AnOptionalTensorListKeepsItsNonesAsElementFlags) {
  // x[:, idx] is aten::index.Tensor(x, [None, idx]): the node reads x and idx, and its
  // `indices` attribute says which elements were tensors.
  OpImporter importer({at::randn({4, 6}), at::tensor({5, 0, 2})});
  const auto index = op("aten::index", "Tensor");
  auto out =
      importer.add_op(index.schema(), boxed(index),
                      {importer.input(0), std::vector<ir::Value*>{nullptr, importer.input(1)}});
  EXPECT_EQ(out.at(0)->type().sizes, (std::vector<int64_t>{4, 3}));
  const ir::Node* node = out.at(0)->producer();
  ASSERT_EQ(node->inputs().size(), 2u);
  EXPECT_EQ(node->input(1), importer.input(1));
  const auto* flags = std::get_if<std::vector<bool>>(node->find_attr("indices"));
  ASSERT_NE(flags, nullptr);
  EXPECT_EQ(*flags, (std::vector<bool>{false, true}));
}

TEST(OpImporter, ASplitBecomesOneSlicePerPiece) {
  OpImporter importer({at::randn({3, 10})});
  const auto split = op("aten::split_with_sizes", "");
  auto pieces = importer.add_pieces(
      split.schema(), boxed(split),
      {importer.input(0), c10::IValue(std::vector<int64_t>{2, 5, 3}), c10::IValue(int64_t{-1})});
  ASSERT_EQ(pieces.size(), 3u);
  const std::vector<std::pair<int64_t, int64_t>> bounds = {{0, 2}, {2, 7}, {7, 10}};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ir::Node* slice = pieces[i]->producer();
    EXPECT_EQ(slice->op(), "aten::slice.Tensor");
    EXPECT_EQ(slice->input(0), importer.input(0));
    EXPECT_EQ(std::get<int64_t>(*slice->find_attr("dim")), 1);
    EXPECT_EQ(std::get<int64_t>(*slice->find_attr("start")), bounds[i].first);
    EXPECT_EQ(std::get<int64_t>(*slice->find_attr("end")), bounds[i].second);
    EXPECT_EQ(pieces[i]->type().sizes,
              (std::vector<int64_t>{3, bounds[i].second - bounds[i].first}));
  }

  const auto unbind = op("aten::unbind", "int");
  auto rows = importer.add_pieces(unbind.schema(), boxed(unbind),
                                  {importer.input(0), c10::IValue(int64_t{0})});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]->producer()->op(), "aten::select.int");
  EXPECT_EQ(std::get<int64_t>(*rows[2]->producer()->find_attr("index")), 2);
  EXPECT_EQ(rows[2]->type().sizes, (std::vector<int64_t>{10}));
}

}  // namespace
}  // namespace kiln
