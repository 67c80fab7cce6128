#include "runtime/jit/object_cache.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <cstring>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Support/xxhash.h>

#include "runtime/jit/code_bundle.h"
#include "runtime/jit/disk_cache.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::jit {
namespace {

constexpr const char* kTag = "kiln-object:";

std::string hex(const uint8_t* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 15];
  }
  return text;
}

struct Search {
  uintptr_t address;  // a function of this build
  std::string id;
};

// The NT_GNU_BUILD_ID note of the loaded object that holds search->address.
int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && search->address >= start &&
        search->address < start + segment.p_memsz) {
      holds = true;
    }
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char* note = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
    const char* end = note + segment.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      const auto* header = reinterpret_cast<const ElfW(Nhdr)*>(note);
      const char* name = note + sizeof(ElfW(Nhdr));
      const char* desc = name + ((header->n_namesz + 3) & ~3u);
      if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0 && desc + header->n_descsz <= end) {
        search->id = hex(reinterpret_cast<const uint8_t*>(desc), header->n_descsz);
        return 1;
      }
      note = desc + ((header->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // the object, without a build ID
}

class ObjectStore : public llvm::ObjectCache {
 public:
  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override {
    const std::string& id = module->getModuleIdentifier();
    if (id.rfind(kTag, 0) != 0) return;
    const std::string key = id.substr(std::strlen(kTag));
    // Called on the thread whose add() compiles the module (orc_jit.cpp), so its bundle.
    if (CodeBundle* bundle = code_bundle_in_use()) bundle->add(key, object.getBuffer());
    DiskCache& cache = DiskCache::instance();
    if (cache.enabled()) cache.put(key, object.getBuffer());
  }

  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module*) override { return nullptr; }
};

}  // namespace

const std::string& build_id() {
  static const std::string id = [] {
    Search search{reinterpret_cast<uintptr_t>(&find_build_id), {}};
    dl_iterate_phdr(find_build_id, &search);
    if (!search.id.empty()) return "gnu:" + search.id;
    Dl_info info{};
    struct stat st {};
    if (dladdr(reinterpret_cast<void*>(&find_build_id), &info) && info.dli_fname &&
        ::stat(info.dli_fname, &st) == 0) {
      return "file:" + std::string(info.dli_fname) + ":" + std::to_string(st.st_size) + ":" +
             std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    }
    return std::string("unknown");
  }();
  return id;
}

std::string object_key(const llvm::Module& module) {
  return object_key(module, host_target(), build_id());
}

std::string code_identity() {
  return code_identity(host_target(), build_id());
}

std::string code_identity(const HostTarget& host, const std::string& build) {
  return "kiln object " + std::to_string(DiskCache::kFormatVersion) + "\n" + host.triple + "\n" +
         host.cpu + "\n" + host.features + "\n" + "llvm " + LLVM_VERSION_STRING + "\n" + build +
         "\n";
}

std::string content_hash(std::string_view bytes) {
  const llvm::XXH128_hash_t hash = llvm::xxh3_128bits(
      llvm::ArrayRef(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  uint8_t digest[16];
  std::memcpy(digest, &hash.high64, 8);
  std::memcpy(digest + 8, &hash.low64, 8);
  return hex(digest, sizeof digest);
}

std::string object_key(const llvm::Module& module, const HostTarget& host,
                       const std::string& build) {
  std::string text = code_identity(host, build);
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  return content_hash(text);
}

void store_object_as(llvm::Module& module, const std::string& key) {
  module.setModuleIdentifier(kTag + key);
}

llvm::ObjectCache& object_store() {
  static ObjectStore* store = new ObjectStore;  // the JIT outlives static destructors
  return *store;
}

}  // namespace kiln::jit
