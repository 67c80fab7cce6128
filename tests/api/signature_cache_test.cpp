// The specialization cache the compiled module and the region runners share: one compile per
// signature however many threads bring it, runs of other signatures go on meanwhile, a compile
// that throws leaves nothing behind, and past the limit nothing is cached.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/api/signature_cache.h"

namespace kiln {
namespace {

SignatureKey key(int64_t k) {
  SignatureKey out;
  out.push_back(k);
  return out;
}

using Cache = SignatureCache<int>;
auto past_limit = [] { return std::make_shared<const int>(-1); };

TEST(SignatureCache, CompilesEachSignatureOnceAndCountsThem) {
  Cache cache;
  int compiles = 0;
  auto compile = [&](int index) {
    ++compiles;
    return std::make_shared<const int>(index);
  };
  EXPECT_EQ(*cache.get(key(7), 8, compile, past_limit), 0);
  EXPECT_EQ(*cache.get(key(9), 8, compile, past_limit), 1);
  EXPECT_EQ(*cache.get(key(7), 8, compile, past_limit), 0);
  EXPECT_EQ(compiles, 2);
  EXPECT_EQ(cache.size(), 2);
}

TEST(SignatureCache, PastTheLimitNothingIsCached) {
  Cache cache;
  auto compile = [](int index) { return std::make_shared<const int>(index); };
  cache.get(key(1), 1, compile, past_limit);
  EXPECT_EQ(*cache.get(key(2), 1, compile, past_limit), -1);
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(*cache.get(key(1), 1, compile, past_limit), 0);
}

TEST(SignatureCache, ACompileThatThrowsLeavesNothingAndTheNextCallCompilesAgain) {
  Cache cache;
  EXPECT_THROW(
      cache.get(
          key(1), 8, [](int) -> Cache::Ptr { throw std::runtime_error("no"); }, past_limit),
      std::runtime_error);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(*cache.get(
                key(1), 8, [](int) { return std::make_shared<const int>(5); }, past_limit),
            5);
}

TEST(SignatureCache, PutReplacesAndEraseIfDrops) {
  Cache cache;
  auto compile = [](int index) { return std::make_shared<const int>(index); };
  cache.get(key(1), 8, compile, past_limit);
  cache.get(key(2), 8, compile, past_limit);
  cache.put(key(1), std::make_shared<const int>(42));
  EXPECT_EQ(*cache.get(key(1), 8, compile, past_limit), 42);
  cache.erase_if([](int value) { return value == 42; });
  EXPECT_EQ(cache.size(), 1);
}

TEST(SignatureCache, ThreadsWithOneNewSignatureShareOneCompile) {
  Cache cache;
  std::atomic<int> compiles = 0;
  auto compile = [&](int) {
    ++compiles;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return std::make_shared<const int>(3);
  };
  std::vector<std::thread> threads;
  std::atomic<int> sum = 0;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] { sum += *cache.get(key(1), 8, compile, past_limit); });
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(sum, 24);
}

TEST(SignatureCache, CachedSignaturesAreServedWhileANewOneCompiles) {
  Cache cache;
  auto compile = [](int index) { return std::make_shared<const int>(index); };
  cache.get(key(1), 8, compile, past_limit);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  std::thread slow([&] {
    cache.get(
        key(2), 8,
        [&](int index) {
          started.set_value();
          released.wait();
          return std::make_shared<const int>(index);
        },
        past_limit);
  });
  started.get_future().wait();
  // key(2) is compiling, its thread blocked: key(1) is still served, at once.
  auto served =
      std::async(std::launch::async, [&] { return *cache.get(key(1), 8, compile, past_limit); });
  EXPECT_EQ(served.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  release.set_value();
  slow.join();
  EXPECT_EQ(served.get(), 0);
  EXPECT_EQ(cache.size(), 2);
}

}  // namespace
}  // namespace kiln
