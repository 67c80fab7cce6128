#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/jit/disk_cache.h"

namespace kiln::jit {
namespace {

namespace fs = std::filesystem;

// A fresh directory for one test's cache.
fs::path fresh_dir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("kiln_disk_cache_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

fs::path entry(const fs::path& dir, const std::string& key) {
  return dir / "objects" / (key + ".o");
}

const std::string kKey = "0123456789abcdef0123456789abcdef";
const std::string kOther = "fedcba9876543210fedcba9876543210";
const std::string kPayload = std::string("object code\0with a zero byte", 28);

TEST(DiskCacheTest, ReturnsWhatWasStored) {
  const fs::path dir = fresh_dir("round_trip");
  DiskCache cache(dir.string(), 1 << 20);
  ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
  EXPECT_FALSE(cache.get(kKey).has_value());
  cache.put(kKey, kPayload);
  EXPECT_EQ(cache.get(kKey).value_or(""), kPayload);
  const DiskCache::Counts counts = cache.counts();
  EXPECT_EQ(counts.hits, 1);
  EXPECT_EQ(counts.misses, 1);
  EXPECT_EQ(counts.writes, 1);
  EXPECT_EQ(cache.usage().entries, 1);
  // Another cache over the same directory (another process) finds it.
  EXPECT_EQ(DiskCache(dir.string(), 1 << 20).get(kKey).value_or(""), kPayload);
  fs::remove_all(dir);
}

TEST(DiskCacheTest, CreatesItsDirectoriesForTheUserAlone) {
  const fs::path dir = fresh_dir("mode") / "nested";
  DiskCache cache(dir.string(), 1 << 20);
  ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(dir / "objects").permissions() & fs::perms::all, fs::perms::owner_all);
  fs::remove_all(dir.parent_path());
}

// Each way an entry can go bad: rejected (a miss), deleted, and stored again afterwards.
void expect_rejected(const std::string& name, const std::function<void(const fs::path&)>& spoil) {
  const fs::path dir = fresh_dir(name);
  DiskCache cache(dir.string(), 1 << 20);
  cache.put(kKey, kPayload);
  spoil(entry(dir, kKey));
  EXPECT_FALSE(cache.get(kKey).has_value()) << name;
  EXPECT_FALSE(fs::exists(entry(dir, kKey))) << name;
  EXPECT_EQ(cache.counts().rejected, 1) << name;
  cache.put(kKey, kPayload);
  EXPECT_EQ(cache.get(kKey).value_or(""), kPayload) << name;
  fs::remove_all(dir);
}

TEST(DiskCacheTest, BadEntriesAreRejectedDeletedAndRebuilt) {
  expect_rejected("truncated", [](const fs::path& p) {
    const std::string bytes = read(p);
    write(p, bytes.substr(0, bytes.size() - 3));
  });
  expect_rejected("header_only_half", [](const fs::path& p) { write(p, read(p).substr(0, 10)); });
  expect_rejected("empty", [](const fs::path& p) { write(p, ""); });
  expect_rejected("flipped_byte", [](const fs::path& p) {
    std::string bytes = read(p);
    bytes[bytes.size() - 5] ^= 0x20;
    write(p, bytes);
  });
  expect_rejected("extended", [](const fs::path& p) { write(p, read(p) + "more"); });
  expect_rejected("other_version", [](const fs::path& p) {
    std::string bytes = read(p);
    bytes[8] += 1;  // the format version follows the 8-byte magic
    write(p, bytes);
  });
  expect_rejected("not_an_entry", [](const fs::path& p) { write(p, std::string(64, 'x')); });
  expect_rejected("another_keys_entry", [](const fs::path& p) {
    // A valid entry for another key, renamed: its header names the other key.
    DiskCache other(p.parent_path().parent_path().string(), 1 << 20);
    other.put(kOther, "another payload");
    fs::rename(entry(p.parent_path().parent_path(), kOther), p);
  });
}

TEST(DiskCacheTest, DirectoriesOthersCanWriteAreRefused) {
  const fs::path dir = fresh_dir("shared");
  fs::create_directories(dir / "objects");
  fs::permissions(dir, fs::perms::all);  // 0777
  DiskCache cache(dir.string(), 1 << 20);
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(cache.why_disabled().find("writable by other users"), std::string::npos)
      << cache.why_disabled();
  cache.put(kKey, kPayload);  // off: stores nothing
  EXPECT_TRUE(fs::is_empty(dir / "objects"));
  fs::remove_all(dir);
}

TEST(DiskCacheTest, DirectoriesOfAnotherUserAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path dir = fresh_dir("foreign");
  fs::create_directories(dir / "objects");
  ASSERT_EQ(::chown(dir.c_str(), 4242, 4242), 0);
  DiskCache cache(dir.string(), 1 << 20);
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(cache.why_disabled().find("belongs to uid 4242"), std::string::npos)
      << cache.why_disabled();
  fs::remove_all(dir);
}

TEST(DiskCacheTest, RelativeOrMissingDirectoriesTurnItOff) {
  EXPECT_FALSE(DiskCache("", 1 << 20).enabled());
  EXPECT_FALSE(DiskCache("relative/dir", 1 << 20).enabled());
}

TEST(DiskCacheTest, KeysThatAreNotHexAreNeverPaths) {
  const fs::path dir = fresh_dir("keys");
  DiskCache cache(dir.string(), 1 << 20);
  cache.put("../escape", kPayload);
  cache.put("ABC", kPayload);
  EXPECT_EQ(cache.usage().entries, 0);
  EXPECT_FALSE(fs::exists(dir / "escape.o"));
  fs::remove_all(dir);
}

TEST(DiskCacheTest, AnEntryWrittenInPartsIsMappedInPlaceAligned) {
  const fs::path dir = fresh_dir("parts");
  DiskCache cache(dir.string(), 1 << 20);
  const std::string big(100000, 'w');
  cache.put(kKey, std::vector<std::string_view>{"head", std::string_view(big), "", "tail"});
  std::shared_ptr<const std::string_view> mapped = cache.map(kKey);
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ(*mapped, "head" + big + "tail");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapped->data()) % 64, 0u);  // the payload's start
  EXPECT_EQ(cache.get(kKey).value_or(""), "head" + big + "tail");   // the same bytes, copied
  // The checksum does not depend on how the bytes were split: the entries differ only in the
  // hash of their key (header bytes 16 to 24).
  cache.put(kOther, "head" + big + "tail");
  const std::string joined = read(entry(dir, kOther)), split = read(entry(dir, kKey));
  EXPECT_EQ(joined.substr(0, 16), split.substr(0, 16));
  EXPECT_EQ(joined.substr(24), split.substr(24));
  mapped.reset();
  // A mapped entry that is damaged is rejected like a read one.
  std::string bytes = read(entry(dir, kKey));
  bytes[bytes.size() / 2] ^= 1;
  write(entry(dir, kKey), bytes);
  EXPECT_EQ(cache.map(kKey), nullptr);
  EXPECT_FALSE(fs::exists(entry(dir, kKey)));
  fs::remove_all(dir);
}

TEST(DiskCacheTest, PastItsCapTheLeastRecentlyUsedEntriesGo) {
  const fs::path dir = fresh_dir("cap");
  const std::string payload(1000, 'p');
  DiskCache cache(dir.string(), 3500);  // three entries of ~1064 bytes fit, four do not
  const std::vector<std::string> keys = {"a1", "b2", "c3", "d4"};
  const auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 3; ++i) {
    cache.put(keys[i], payload);
    fs::last_write_time(entry(dir, keys[i]), now - std::chrono::hours(10 - i));
  }
  ASSERT_TRUE(cache.get("a1").has_value());  // the oldest, used now: kept
  cache.put("d4", payload);
  EXPECT_TRUE(fs::exists(entry(dir, "a1")));
  EXPECT_FALSE(fs::exists(entry(dir, "b2")));  // least recently used
  EXPECT_TRUE(fs::exists(entry(dir, "d4")));
  EXPECT_LE(cache.usage().bytes, 3500);
  cache.clear();
  EXPECT_EQ(cache.usage().entries, 0);
  fs::remove_all(dir);
}

TEST(DiskCacheTest, ConcurrentProcessesNeverSeeAPartialEntry) {
  const fs::path dir = fresh_dir("concurrent");
  { DiskCache(dir.string(), 64 << 20); }
  std::string big(256 << 10, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 7 + 3);
  std::vector<pid_t> writers;
  for (int w = 0; w < 4; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      DiskCache cache(dir.string(), 64 << 20);
      for (int i = 0; i < 40; ++i)
        cache.put(kKey, big);
      ::_exit(0);
    }
    writers.push_back(pid);
  }
  DiskCache reader(dir.string(), 64 << 20);
  for (int i = 0; i < 200; ++i) {
    if (std::optional<std::string> got = reader.get(kKey)) ASSERT_EQ(*got, big);  // never torn
  }
  for (pid_t pid : writers) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(reader.counts().rejected, 0);
  EXPECT_EQ(reader.get(kKey).value_or(""), big);
  EXPECT_EQ(reader.usage().entries, 1);  // no temporary file left behind
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::jit
