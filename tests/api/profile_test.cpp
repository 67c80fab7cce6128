// CompiledModule::profile and the profiling session: every plan step timed and labelled, the
// times per call consistent with the whole call, and sessions that do not nest.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "kiln/kiln.h"
#include "support/test_models.h"

namespace kiln {
namespace {

using testing::load_model;

TEST(Profile, EveryStepOfTheCnnIsTimedAndLabelled) {
  auto compiled = compile(load_model("cnn_traced"));
  torch::NoGradGuard no_grad;
  const Profile profile = compiled.profile({torch::randn({2, 3, 32, 32})}, 5);
  ASSERT_EQ(profile.calls, 5);
  ASSERT_FALSE(profile.steps.empty());
  std::set<std::string> categories;
  double sum = 0;
  for (size_t i = 0; i < profile.steps.size(); ++i) {
    const ProfiledStep& step = profile.steps[i];
    EXPECT_EQ(step.runs, 5) << step.name;  // one plan, every step once per call
    EXPECT_GE(step.ms, 0) << step.name;
    if (i > 0) {
      EXPECT_LE(step.ms, profile.steps[i - 1].ms) << "not sorted, slowest first";
    }
    if (step.name.starts_with("kernel ")) {
      EXPECT_FALSE(step.ops.empty()) << step.name;
    }
    EXPECT_FALSE(step.output_sizes.empty()) << step.name;
    categories.insert(step.category);
    sum += step.ms;
  }
  // The traced CNN's convolutions run on oneDNN (its image goes into channels-last inside the
  // first one, or in a layout step of its own without kiln's oneDNN), and something else after.
  EXPECT_TRUE(categories.count("convolution")) << profile.to_text();
  EXPECT_GE(categories.size(), 2u) << profile.to_text();
  EXPECT_NEAR(sum, profile.steps_ms, 1e-9);
  // The steps run inside the timed calls.
  EXPECT_LE(profile.steps_ms, profile.call_ms) << profile.to_text();
  const std::string text = profile.to_text();
  EXPECT_NE(text.find("5 calls"), std::string::npos) << text;
  EXPECT_NE(text.find("by category:"), std::string::npos) << text;
  const std::string json = profile.to_json();
  EXPECT_NE(json.find("\"category\": \"convolution\""), std::string::npos) << json;
}

TEST(Profile, AKernelStepNamesTheOpsFusedIntoIt) {
  auto compiled = compile(load_model("mlp"));
  torch::NoGradGuard no_grad;
  const Profile profile = compiled.profile({torch::randn({8, 64})}, 2);
  // The MLP's log_softmax runs in a generated kernel (its gelu and relu may run inside oneDNN's
  // linears): its step is named by its ops.
  bool named = false;
  for (const ProfiledStep& step : profile.steps)
    named |= step.name.starts_with("kernel ") && step.ops.find("log_softmax") != std::string::npos;
  EXPECT_TRUE(named) << profile.to_text();
}

TEST(Profile, SessionsDoNotNestAndBadCountsAreRefused) {
  start_profiling();
  EXPECT_THROW(
      {
        try {
          start_profiling();
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
          throw;
        }
      },
      Error);
  EXPECT_THROW(finish_profiling(0, 1.0), Error);  // closes the session all the same
  start_profiling();
  EXPECT_TRUE(finish_profiling(1, 1.0).steps.empty());  // nothing ran
  auto compiled = compile(load_model("mlp"));
  EXPECT_THROW(compiled.profile({torch::randn({8, 64})}, 0), Error);
}

TEST(Profile, ClosedSessionRecordsNothing) {
  auto compiled = compile(load_model("mlp"));
  torch::NoGradGuard no_grad;
  compiled.forward({torch::randn({8, 64})});
  start_profiling();
  const Profile empty = finish_profiling(1, 1.0);
  EXPECT_TRUE(empty.steps.empty());
  compiled.forward({torch::randn({8, 64})});  // after the session: not counted anywhere
  start_profiling();
  EXPECT_TRUE(finish_profiling(1, 1.0).steps.empty());
}

// Sessions open and close while four threads call one compiled module: every step a session saw
// ran in whole calls of its threads, and nothing crashes or races (make test-tsan runs this).
TEST(Profile, SessionsOpenAndCloseWhileThreadsCall) {
  auto compiled = compile(load_model("mlp"));
  const at::Tensor input = torch::randn({8, 64});
  compiled.forward({input});
  std::atomic<bool> stop = false;
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      torch::NoGradGuard no_grad;
      while (!stop.load())
        compiled.forward({input});
    });
  }
  size_t steps = 0;
  for (int session = 0; session < 20; ++session) {
    start_profiling();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Profile profile = finish_profiling(1, 1.0);
    for (const ProfiledStep& step : profile.steps)
      EXPECT_GE(step.runs, 1) << step.name;
    steps = std::max(steps, profile.steps.size());
  }
  stop = true;
  for (auto& caller : callers)
    caller.join();
  EXPECT_GT(steps, 0u) << "no session saw a step in 20 tries";
}

}  // namespace
}  // namespace kiln
