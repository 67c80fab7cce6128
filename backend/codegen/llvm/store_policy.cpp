#include "backend/codegen/llvm/store_policy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace kiln::codegen {

int64_t stream_bytes_for(bool huge_pages, int64_t l3_bytes) {
  if (!huge_pages || l3_bytes <= 0) return kStreamBytes;
  return std::max(kStreamBytes, l3_bytes / 2 + 1);
}

bool tensors_on_huge_pages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);  // "always [madvise] never": the bracketed one holds
  if (mode.find("[always]") != std::string::npos) return true;
  const char* advise = std::getenv("THP_MEM_ALLOC_ENABLE");
  return mode.find("[madvise]") != std::string::npos && advise && std::strcmp(advise, "1") == 0;
}

int64_t host_l3_bytes() {
  // The kernel's description of the L3 one core shares ("32768K"). Not sysconf first: glibc
  // reads CPUID, which on this project's AMD machines gives the whole package's L3 (384 MB
  // across twelve core complexes), not the 32 MB a core can use.
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  int64_t size = 0;
  std::string unit;
  if (in >> size) {
    in >> unit;
    if (unit == "K") return size << 10;
    if (unit == "M") return size << 20;
    return size;
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE); bytes > 0) return bytes;
#endif
  return 0;
}

int64_t host_stream_bytes() {
  static const int64_t bytes = stream_bytes_for(tensors_on_huge_pages(), host_l3_bytes());
  return bytes;
}

}  // namespace kiln::codegen
