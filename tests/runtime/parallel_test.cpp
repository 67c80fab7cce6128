// run_parallel: at::parallel_for, callable from any file (runtime/parallel.h).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/parallel.h"

namespace kiln {
namespace {

TEST(RunParallel, CoversTheRangeExactlyOnce) {
  for (const auto& [range, grain] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1, 1}, {7, 3}, {4096, 1}, {100003, 64}, {1 << 20, 32768}}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(range));
    run_parallel(range, grain, [&](int64_t begin, int64_t end) {
      ASSERT_LE(0, begin);
      ASSERT_LT(begin, end);
      ASSERT_LE(end, range);
      for (int64_t i = begin; i < end; ++i)
        seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < range; ++i)
      ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << range;
  }
}

TEST(RunParallel, ARangeNoLargerThanTheGrainRunsInOneCallOnTheCallingThread) {
  int calls = 0;
  run_parallel(1000, 1000, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
    EXPECT_FALSE(at::in_parallel_region());
  });
  EXPECT_EQ(calls, 1);
}

// This file is compiled without OpenMP, where at::parallel_for would run everything on the
// calling thread; run_parallel still reaches torch's threads.
TEST(RunParallel, UsesTorchsThreadsFromAFileBuiltWithoutOpenMP) {
  if (at::get_num_threads() < 2) GTEST_SKIP() << "needs at least 2 intra-op threads";
  std::mutex mutex;
  std::set<std::thread::id> threads;
  run_parallel(1 << 16, 1, [&](int64_t, int64_t) {
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_GE(threads.size(), 2u);
}

}  // namespace
}  // namespace kiln
