#include "runtime/jit/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "passes/base/environment.h"
#include "passes/base/hash.h"
#include "passes/base/mapped_file.h"
#include "passes/base/strings.h"

namespace kiln::jit {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '\0'};
constexpr const char* kSuffix = ".o";
constexpr const char* kTempPrefix = ".tmp-";

// Before every entry's bytes. Entries are read only on the machine that wrote them (the key
// holds the CPU), so the layout is the host's.
// 64 bytes, so that a mapped entry's payload starts 64-byte aligned (graph_cache.h maps packed
// weights straight from it).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t key_hash;
  uint64_t size;
  uint64_t hash;
  char padding[24];
};
static_assert(sizeof(Header) == 64);

std::string errno_text() {
  return std::strerror(errno);
}

// Makes `path` and its missing parents, each new one 0700.
bool make_directories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Why `path` is no place for code kiln will run, or "".
std::string unsafe_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "cannot read " + path + ": " + errno_text();
  if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
  if (st.st_uid != ::geteuid()) {
    return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(::geteuid()) + ")";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return path + " is writable by other users (mode " + mode + "; make it 0700)";
  }
  return "";
}

bool is_key(const std::string& key) {
  return !key.empty() && key.size() <= 128 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

struct File {
  std::string path;
  int64_t bytes;
  timespec modified;
};

// The entries and temporary files in `dir`.
std::vector<File> files_in(const std::string& dir) {
  std::vector<File> files;
  DIR* listing = ::opendir(dir.c_str());
  if (!listing) return files;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({path, static_cast<int64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(listing);
  return files;
}

bool is_temporary(const std::string& path) {
  return path.find(std::string("/") + kTempPrefix) != std::string::npos;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

std::atomic<DiskCache*> opened_cache = nullptr;

}  // namespace

DiskCache* DiskCache::opened() {
  return opened_cache.load();
}

DiskCache& DiskCache::instance() {
  static DiskCache* cache = [] {
    const Environment& env = environment();
    auto* made =
        new DiskCache(env.cache_dir, env.cache_max_mb << 20, env.cache ? "" : "KILN_CACHE=0");
    if (env.cache && !made->enabled()) {
      log(LogLevel::Warn, "the disk cache is off (compiled code is not kept between processes): " +
                              made->why_disabled_ +
                              ". Set KILN_CACHE_DIR to a directory of your own, or KILN_CACHE=0 "
                              "to turn the cache off without this warning");
    }
    opened_cache = made;
    return made;
  }();
  return *cache;
}

DiskCache::DiskCache(std::string dir, int64_t max_bytes, std::string off_because)
    : dir_(std::move(dir)),
      objects_(dir_ + "/objects"),
      max_bytes_(max_bytes),
      why_disabled_(std::move(off_because)) {
  if (!why_disabled_.empty()) return;
  if (dir_.empty() || dir_[0] != '/') {
    why_disabled_ = "no cache directory (set KILN_CACHE_DIR to an absolute path, or HOME)";
    return;
  }
  if (!make_directories(objects_)) {
    why_disabled_ = "cannot create " + objects_ + ": " + errno_text();
    return;
  }
  why_disabled_ = unsafe_directory(dir_);
  if (why_disabled_.empty()) why_disabled_ = unsafe_directory(objects_);
}

std::string DiskCache::entry_path(const std::string& key) const {
  return objects_ + "/" + key + kSuffix;
}

std::shared_ptr<const std::string_view> DiskCache::map(const std::string& key) {
  if (!enabled() || !is_key(key)) return nullptr;
  const std::string path = entry_path(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    ++misses_;
    return nullptr;
  }
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0;
  const size_t length = sized ? static_cast<size_t>(st.st_size) : 0;
  // The payload's users never write it (and one that did would write its own copy of a page).
  std::shared_ptr<const std::string_view> mapped = length == 0 ? nullptr : map_private(fd, length);
  const std::string why_unmapped = errno_text();
  ::close(fd);
  if (!mapped) {
    reject(path, length == 0 && sized ? "it is empty" : "cannot read it: " + why_unmapped);
    return nullptr;
  }
  const char* bytes = mapped->data();
  Header header{};
  if (length < sizeof header) {
    reject(path, "truncated (" + std::to_string(length) + " bytes)");
    return nullptr;
  }
  std::memcpy(&header, bytes, sizeof header);
  const std::string_view payload = mapped->substr(sizeof header);
  std::string why;
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0)
    why = "not a kiln cache entry";
  else if (header.version != kFormatVersion)
    why = "format version " + std::to_string(header.version) + ", not " +
          std::to_string(kFormatVersion);
  else if (header.key_hash != checksum(key))
    why = "written for another key";
  else if (header.size != payload.size())
    why = "truncated or extended (" + std::to_string(payload.size()) + " bytes of " +
          std::to_string(header.size) + ")";
  else if (header.hash != checksum(payload))
    why = "its bytes do not match their hash";
  if (!why.empty()) {
    reject(path, why);
    return nullptr;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: evicted last
  ++hits_;
  return shared_view(std::move(mapped), payload);  // the mapping lives as long as the payload
}

std::optional<std::string> DiskCache::get(const std::string& key) {
  std::shared_ptr<const std::string_view> payload = map(key);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

void DiskCache::put(const std::string& key, std::string_view bytes) {
  put(key, std::vector<std::string_view>{bytes});
}

void DiskCache::put(const std::string& key, const std::vector<std::string_view>& parts) {
  if (!enabled() || !is_key(key)) return;
  static std::atomic<uint64_t> serial = 0;
  const std::string temporary =
      objects_ + "/" + kTempPrefix + std::to_string(::getpid()) + "-" +
      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "-" +
      std::to_string(serial++);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    log(LogLevel::Debug, "disk cache: cannot write " + temporary + ": " + errno_text());
    return;
  }
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kFormatVersion;
  header.key_hash = checksum(key);
  Checksum hash;
  for (std::string_view part : parts) {
    hash.update(part);
    header.size += part.size();
  }
  header.hash = hash.value();
  bool written = write_all(fd, reinterpret_cast<const char*>(&header), sizeof header);
  for (std::string_view part : parts)
    written = written && write_all(fd, part.data(), part.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || ::rename(temporary.c_str(), entry_path(key).c_str()) != 0) {
    log(LogLevel::Debug, "disk cache: cannot write an entry: " + errno_text());
    ::unlink(temporary.c_str());
    return;
  }
  ++writes_;
  evict();
}

void DiskCache::remove(const std::string& key) {
  if (enabled() && is_key(key)) ::unlink(entry_path(key).c_str());
}

void DiskCache::reject(const std::string& path, const std::string& why) {
  ++misses_;
  ++rejected_;
  ::unlink(path.c_str());
  const std::string message =
      "disk cache: rejected and deleted " + path + ": " + why + " (compiled again)";
  log(warned_.exchange(true) ? LogLevel::Debug : LogLevel::Warn, message);
}

void DiskCache::evict() {
  std::vector<File> files = files_in(objects_);
  int64_t total = 0;
  for (const File& f : files)
    total += f.bytes;
  if (total <= max_bytes_) return;
  // Oldest first; down to 90% of the cap, so that the next writes do not evict again at once.
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.modified.tv_sec != b.modified.tv_sec ? a.modified.tv_sec < b.modified.tv_sec
                                                  : a.modified.tv_nsec < b.modified.tv_nsec;
  });
  const int64_t target = max_bytes_ / 10 * 9;
  for (const File& f : files) {
    if (total <= target) break;
    if (is_temporary(f.path)) continue;  // another process is writing it
    if (::unlink(f.path.c_str()) == 0) total -= f.bytes;
  }
}

DiskCache::Usage DiskCache::usage() const {
  Usage usage;
  if (!enabled()) return usage;
  for (const File& f : files_in(objects_)) {
    if (is_temporary(f.path)) continue;
    ++usage.entries;
    usage.bytes += f.bytes;
  }
  return usage;
}

void DiskCache::clear() {
  if (!enabled()) return;
  for (const File& f : files_in(objects_))
    ::unlink(f.path.c_str());
}

DiskCache::Counts DiskCache::counts() const {
  return {hits_.load(), misses_.load(), rejected_.load(), writes_.load()};
}

}  // namespace kiln::jit
