// The output pool: a freed large output's memory serves the next call, and an output the caller
// still holds is never handed out again, whichever thread frees it, however it is resized.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <thread>
#include <vector>

#include "runtime/executor.h"
#include "runtime/output_pool.h"
#include "support/one_kernel_plan.h"

namespace kiln {
namespace {

constexpr int64_t kLarge = 1 << 20;  // floats: 4 MB, above the pool's threshold

void scale(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = in[i] * 3;
}

// out = 3 * x, the output a graph output (not planned).
Plan scale_plan(int64_t n) {
  return testing::one_kernel_plan(scale, n, 1 << 16, "scale");
}

TEST(OutputPool, AFreedOutputServesTheNextCall) {
  Plan plan = scale_plan(kLarge);
  const at::Tensor x = at::randn({kLarge});
  const void* first = nullptr;
  {
    at::Tensor out = run_plan(plan, {x}, false).at(0);
    first = out.data_ptr();
    EXPECT_TRUE(out.equal(x * 3));
  }
  at::Tensor again = run_plan(plan, {x}, false).at(0);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_TRUE(again.equal(x * 3));
}

TEST(OutputPool, OutputsHeldAcrossCallsAreNeverShared) {
  Plan plan = scale_plan(kLarge);
  std::vector<at::Tensor> held;
  for (int call = 0; call < 4; ++call) {
    held.push_back(run_plan(plan, {at::full({kLarge}, static_cast<float>(call))}, false).at(0));
  }
  for (int call = 0; call < 4; ++call) {
    for (int other = call + 1; other < 4; ++other)
      EXPECT_NE(held[call].data_ptr(), held[other].data_ptr());
    EXPECT_TRUE(held[call].eq(3.0f * call).all().item<bool>()) << call;
  }
}

TEST(OutputPool, AViewKeepsTheBlockFromTheNextCall) {
  Plan plan = scale_plan(kLarge);
  const at::Tensor x = at::randn({kLarge});
  at::Tensor view;
  {
    at::Tensor out = run_plan(plan, {x}, false).at(0);
    view = out.narrow(0, 10, 100);  // the storage lives on through it
  }
  const at::Tensor expected = view.clone();
  at::Tensor next = run_plan(plan, {at::zeros({kLarge})}, false).at(0);
  EXPECT_NE(next.data_ptr(), view.storage().data());
  EXPECT_TRUE(view.equal(expected));
}

TEST(OutputPool, OutputsFreedOnOtherThreadsAndResizedStayIntact) {
  Plan plan = scale_plan(kLarge);
  at::Tensor grown = run_plan(plan, {at::ones({kLarge})}, false).at(0);
  grown.resize_({2 * kLarge});  // as eager's outputs can be
  EXPECT_TRUE(grown.narrow(0, 0, kLarge).eq(3.0f).all().item<bool>());
  grown.narrow(0, kLarge, kLarge).fill_(5);

  // Eight threads call the plan and free their outputs at once; each checks its own values.
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < 20; ++call) {
        const float value = static_cast<float>(t * 100 + call);
        at::Tensor out = run_plan(plan, {at::full({kLarge}, value)}, false).at(0);
        std::this_thread::yield();
        wrong[t] += !out.eq(3 * value).all().item<bool>();
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  for (int t = 0; t < 8; ++t)
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_TRUE(grown.narrow(0, 0, kLarge).eq(3.0f).all().item<bool>());
  EXPECT_TRUE(grown.narrow(0, kLarge, kLarge).eq(5.0f).all().item<bool>());
  EXPECT_LE(output_pool_free_bytes(), kPoolCapacityBytes);
}

// Only blocks of kPooledBytes or more are kept when freed; smaller ones go back to ATen's
// allocator.
TEST(OutputPool, OnlyLargeBlocksAreKept) {
  const size_t before = output_pool_free_bytes();
  pooled_empty(ir::make_contiguous(ir::DType::Float32, {16}));  // freed at once
  EXPECT_EQ(output_pool_free_bytes(), before);
  const int64_t n = 3 * kLarge + 7;  // a size no other test frees
  at::Tensor large = pooled_empty(ir::make_contiguous(ir::DType::Float32, {n}));
  EXPECT_EQ(large.storage().allocator(), output_pool());
  EXPECT_EQ(large.sizes(), at::IntArrayRef({n}));
  large.reset();
  EXPECT_GE(output_pool_free_bytes(), before + static_cast<size_t>(n) * sizeof(float));
}

}  // namespace
}  // namespace kiln
