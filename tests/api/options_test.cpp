#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/options.h"

namespace kiln {
namespace {

std::string error_of(const std::string& text) {
  try {
    CompileOptions::parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

TEST(Options, DefaultsAreDocumentedValues) {
  CompileOptions options;
  EXPECT_EQ(options.to_string(),
            "mode=default,target=auto,strict=false,fusion=true,max_specializations=8,"
            "precision=fp32");
}

TEST(Options, ParsesEveryKey) {
  auto options = CompileOptions::parse(
      " mode=max-autotune, "
      "target=cpu,strict=true,fusion=false,max_specializations=3,precision=bf16,dump_dir=/tmp/k");
  EXPECT_EQ(options.mode, "max-autotune");
  EXPECT_EQ(options.target, Target::CPU);
  EXPECT_TRUE(options.strict);
  EXPECT_FALSE(options.fusion);
  EXPECT_EQ(options.max_specializations, 3);
  EXPECT_EQ(options.precision, Precision::BF16);
  EXPECT_EQ(options.dump_dir, "/tmp/k");
}

TEST(Options, ToStringRoundTrips) {
  auto options = CompileOptions::parse(
      "mode=reduce-overhead,target=cuda,strict=true,max_specializations=2,"
      "precision=bf16");
  EXPECT_EQ(CompileOptions::parse(options.to_string()).to_string(), options.to_string());
}

TEST(Options, FromMapUsesTheSameKeys) {
  auto options =
      CompileOptions::from_map({{"mode", "max-autotune-no-cudagraphs"}, {"fusion", "0"}});
  EXPECT_EQ(options.mode, "max-autotune-no-cudagraphs");
  EXPECT_FALSE(options.fusion);
}

TEST(Options, UnknownKeyNamesItAndListsValidKeys) {
  EXPECT_EQ(error_of("fusoin=true"),
            "kiln (invalid input): unknown option 'fusoin'; valid options: mode, target, strict, "
            "fusion, max_specializations, precision, dump_dir");
}

TEST(Options, BadPrecisionListsThePrecisions) {
  EXPECT_EQ(error_of("precision=fp16"),
            "kiln (invalid input): bad value 'fp16' for option 'precision'; allowed: fp32, bf16");
}

TEST(Options, BadModeListsTheModes) {
  EXPECT_EQ(error_of("mode=fast"),
            "kiln (invalid input): bad value 'fast' for option 'mode'; allowed: default, "
            "reduce-overhead, max-autotune, max-autotune-no-cudagraphs");
}

TEST(Options, BadTargetListsTheTargets) {
  EXPECT_NE(error_of("target=tpu").find("allowed: auto, cpu, cuda"), std::string::npos);
}

TEST(Options, BadBoolean) {
  EXPECT_NE(
      error_of("strict=yes").find("bad value 'yes' for option 'strict'; allowed: true, false"),
      std::string::npos);
}

TEST(Options, BadMaxSpecializations) {
  EXPECT_NE(error_of("max_specializations=0").find("an integer from 1 to 999999"),
            std::string::npos);
  EXPECT_NE(error_of("max_specializations=-2").find("an integer from 1 to 999999"),
            std::string::npos);
  EXPECT_NE(error_of("max_specializations=lots").find("an integer from 1 to 999999"),
            std::string::npos);
}

TEST(Options, ItemWithoutValue) {
  EXPECT_NE(error_of("strict").find("option 'strict' has no value; write key=value"),
            std::string::npos);
}

TEST(Options, FromMapRejectsUnknownKeys) {
  EXPECT_THROW(CompileOptions::from_map({{"speed", "fast"}}), Error);
}

}  // namespace
}  // namespace kiln
