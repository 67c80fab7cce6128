// The JIT's side of the disk cache (disk_cache.h): the key a module's object code is stored
// under, and the LLVM ObjectCache through which the JIT hands over what it compiled.
#pragma once

#include <string>
#include <string_view>

#include "runtime/jit/orc_jit.h"

namespace llvm {
class Module;
class ObjectCache;
}  // namespace llvm

namespace kiln::jit {

/// The key of `module`'s object code, taken before it is optimized (32 lowercase hex digits): a
/// hash of its IR text (the kernels, their schedules and every codegen choice are in it), the
/// host (triple, CPU, features), LLVM's version, this build of kiln and the entry format.
std::string object_key(const llvm::Module& module);
/// The same for another host and build (what a key depends on, for tests).
std::string object_key(const llvm::Module& module, const HostTarget& host,
                       const std::string& build);

/// What every object key depends on besides the module (one line each: the format, the host's
/// triple, CPU and features, LLVM's version, the build): code made where it differs does not
/// serve here.
std::string code_identity();
std::string code_identity(const HostTarget& host, const std::string& build);

/// 32 lowercase hex digits of an XXH3-128 hash of `bytes` (about 10 GB/s): what keys other
/// entries of the disk cache (a cached graph's frozen weights: backend/api/graph_cache.h).
std::string content_hash(std::string_view bytes);

/// This build of kiln's JIT: the GNU build ID of the binary its code is in (libkiln.so, or a
/// test executable), else that file's size and modification time.
const std::string& build_id();

/// Marks `module` so that the JIT's compiler stores its object code under `key`.
void store_object_as(llvm::Module& module, const std::string& key);

/// The ObjectCache the JIT's compiler reports compiled objects to: it stores those of marked
/// modules in DiskCache::instance() and the code bundle in use, and never answers a lookup
/// (OrcJit::add looks up entries itself, before optimizing, which is most of the time a hit saves).
llvm::ObjectCache& object_store();

}  // namespace kiln::jit
