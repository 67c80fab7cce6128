// run_on_meta_remembered: an op's meta run is taken from memory only where its inputs' metadata
// and its other arguments are equal, and never for views.
#include "backend/capture/meta_memo.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

struct CountingOp {
  c10::OperatorHandle handle;
  int runs = 0;

  CountingOp(const char* name, const char* overload)
      : handle(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload)) {}

  torch::jit::Stack operator()(torch::jit::Stack stack) {
    run_on_meta_remembered(
        handle.schema(),
        [this](torch::jit::Stack& s) {
          ++runs;
          handle.callBoxed(s);
        },
        stack);
    return stack;
  }
};

at::Tensor meta(at::IntArrayRef sizes) {
  return at::empty(sizes, at::TensorOptions().device(at::kMeta));
}

TEST(MetaMemo, EqualInputsRunOnceAndGetFreshOutputs) {
  CountingOp leaky_relu("aten::leaky_relu", "");
  const at::Tensor x = meta({2, 17, 5});
  auto first = leaky_relu({x, 0.5});
  auto second = leaky_relu({meta({2, 17, 5}), 0.5});
  EXPECT_EQ(leaky_relu.runs, 1);
  ASSERT_EQ(second.size(), 1u);
  const at::Tensor a = first[0].toTensor(), b = second[0].toTensor();
  EXPECT_TRUE(b.is_meta());
  EXPECT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(a.strides(), b.strides());
  EXPECT_NE(a.unsafeGetTensorImpl(), b.unsafeGetTensorImpl());  // each node its own value
}

TEST(MetaMemo, AnyDifferenceRunsAgain) {
  CountingOp leaky_relu("aten::leaky_relu", "");
  const at::Tensor x = meta({3, 19, 7});
  leaky_relu({x, 0.25});
  leaky_relu({x, 0.125});                                // another slope
  leaky_relu({x.transpose(0, 2), 0.25});                 // other sizes and strides
  leaky_relu({meta({3, 19, 7}).to(at::kDouble), 0.25});  // another dtype
  auto strided = leaky_relu({x.as_strided({3, 19, 7}, {1, 21, 3}), 0.25});
  EXPECT_EQ(leaky_relu.runs, 5);
  EXPECT_EQ(strided[0].toTensor().strides(), at::IntArrayRef({1, 21, 3}));
}

TEST(MetaMemo, ViewsAndRealTensorsAlwaysRun) {
  CountingOp transpose("aten::transpose", "int");
  const at::Tensor x = meta({4, 23});
  transpose({x, int64_t{0}, int64_t{1}});
  transpose({x, int64_t{0}, int64_t{1}});
  EXPECT_EQ(transpose.runs, 2);

  CountingOp relu("aten::relu", "");
  relu({at::zeros({2, 29})});
  relu({at::zeros({2, 29})});
  EXPECT_EQ(relu.runs, 2);
}

}  // namespace
}  // namespace kiln
