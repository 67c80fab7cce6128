#include "backend/api/package_file.h"

#include <cstring>

#include "kiln/error.h"
#include "passes/base/hash.h"

namespace kiln {
namespace {

constexpr std::string_view kMagic("KILNPKG\0", 8);
constexpr std::string_view kEntryPrefix = "entry:";

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

constexpr size_t kAlignment = 64;

void append_section(std::string& out, std::string_view name, std::string_view bytes) {
  append(out, static_cast<uint32_t>(name.size()));
  out.append(name);
  append(out, static_cast<uint64_t>(bytes.size()));
  const size_t start = out.size() + sizeof(uint32_t);
  const auto padding = static_cast<uint32_t>((kAlignment - start % kAlignment) % kAlignment);
  append(out, padding);
  out.append(padding, '\0');
  out.append(bytes);
}

// Reads fields front to back; running past the end is a truncated file.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  template <typename T>
  T take() {
    T value;
    std::memcpy(&value, take_bytes(sizeof value).data(), sizeof value);
    return value;
  }
  std::string_view take_bytes(uint64_t size) {
    if (size > bytes_.size() - at_) fail("it is truncated (a section runs past its end)");
    std::string_view part = bytes_.substr(at_, size);
    at_ += size;
    return part;
  }
  bool done() const { return at_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorKind::InvalidInput, "cannot load kiln package '" + path_ + "': " + why);
  }

 private:
  std::string_view bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

}  // namespace

void check_package_header(std::string_view bytes, const std::string& path) {
  Reader header(bytes, path);
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    header.fail("it is not a kiln package (no kiln header); make one with kiln.save / kiln::save");
  if (bytes.size() < kMagic.size() + 16) header.fail("it is truncated");
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + kMagic.size(), sizeof version);
  if (version != kPackageVersion) {
    header.fail("it has package format " + std::to_string(version) + ", and this kiln reads " +
                std::to_string(kPackageVersion) + "; save it again with this kiln");
  }
}

std::string encode_package(const PackageContents& contents) {
  std::string out(kMagic);
  append(out, kPackageVersion);
  append(out, static_cast<uint32_t>(5 + contents.entries.size()));
  append_section(out, "identity", contents.identity);
  append_section(out, "options", contents.options);
  append_section(out, "module", contents.module);
  append_section(out, "signatures", contents.signatures);
  append_section(out, "grouping_threads", std::to_string(contents.grouping_threads));
  for (const auto& [key, entry] : contents.entries)
    append_section(out, std::string(kEntryPrefix) + key, entry);
  append(out, checksum(out));
  return out;
}

PackageContents decode_package(std::string_view bytes, const std::string& path) {
  check_package_header(bytes, path);
  check_package_checksum(bytes, path);
  return decode_package_unchecked(bytes, path);
}

void check_package_checksum(std::string_view bytes, const std::string& path) {
  if (bytes.size() < sizeof(uint64_t)) Reader(bytes, path).fail("it is truncated");
  const std::string_view body = bytes.substr(0, bytes.size() - sizeof(uint64_t));
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body.size(), sizeof stored);
  if (stored != checksum(body))
    Reader(bytes, path).fail("its checksum does not match: it is truncated or corrupt");
}

PackageContents decode_package_unchecked(std::string_view bytes, const std::string& path) {
  check_package_header(bytes, path);
  const uint32_t version = kPackageVersion;
  const std::string_view body = bytes.substr(0, bytes.size() - sizeof(uint64_t));
  Reader reader(body, path);
  reader.take_bytes(kMagic.size() + sizeof version);
  const uint32_t sections = reader.take<uint32_t>();
  PackageContents contents;
  bool have_module = false, have_options = false;
  for (uint32_t i = 0; i < sections; ++i) {
    const std::string name(reader.take_bytes(reader.take<uint32_t>()));
    const uint64_t size = reader.take<uint64_t>();
    reader.take_bytes(reader.take<uint32_t>());  // the padding
    std::string_view value = reader.take_bytes(size);
    if (name == "identity") {
      contents.identity = value;
    } else if (name == "options") {
      contents.options = value;
      have_options = true;
    } else if (name == "module") {
      contents.module = value;
      have_module = true;
    } else if (name == "signatures") {
      contents.signatures = value;
    } else if (name == "grouping_threads") {
      contents.grouping_threads = std::max<int64_t>(1, std::atoll(std::string(value).c_str()));
    } else if (name.rfind(kEntryPrefix, 0) == 0) {
      contents.entries[name.substr(kEntryPrefix.size())] = value;
    } else {
      reader.fail("it has a section '" + name + "' this kiln does not know");
    }
  }
  if (!reader.done()) reader.fail("it has bytes after its last section");
  if (!have_module || !have_options) reader.fail("it has no module or no options");
  return contents;
}

}  // namespace kiln
