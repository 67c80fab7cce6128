#include "backend/api/graph_cache.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstring>
#include <map>

#include "passes/base/environment.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/code_bundle.h"
#include "runtime/jit/disk_cache.h"
#include "runtime/jit/object_cache.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_LLVM
namespace {

constexpr uint32_t kEntryVersion = 1;

constexpr size_t kAlignment = 64;  // of each constant's bytes in an entry (oneDNN's preference)

// The bytes from a dense tensor's first element to its last.
std::string_view span_of(const at::Tensor& t) {
  int64_t elements = t.numel() == 0 ? 0 : 1;
  for (int64_t d = 0; d < t.dim() && elements; ++d)
    elements += (t.size(d) - 1) * t.stride(d);
  return {static_cast<const char*>(t.const_data_ptr()),
          static_cast<size_t>(elements * t.element_size())};
}

bool storable(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !t.is_quantized() &&
         !t.is_conj() && !t.is_neg() && t.is_non_overlapping_and_dense();
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads an entry front to back; anything out of bounds makes it unreadable.
class EntryReader {
 public:
  explicit EntryReader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T take() {
    T value{};
    std::memcpy(&value, take_bytes(sizeof value).data(), sizeof value);
    return value;
  }
  std::string_view take_bytes(uint64_t size) {
    if (size > bytes_.size() - at_) throw std::runtime_error("the entry is shorter than it says");
    std::string_view part = bytes_.substr(at_, size);
    at_ += size;
    return part;
  }
  std::string_view at(uint64_t offset, uint64_t size) const {
    if (offset > bytes_.size() || size > bytes_.size() - offset)
      throw std::runtime_error("a constant lies past the entry's end");
    return bytes_.substr(offset, size);
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

// The pipeline's switches that change what the graph passes make.
std::string switches(const PipelineOptions& options) {
  std::string text =
      "fusion=" + std::to_string(options.fusion) + " strict=" + std::to_string(options.strict) +
      " prepack=" + std::to_string(options.prepack_onednn) +
      " own_onednn=" + std::to_string(options.own_onednn) +
      " bf16=" + std::to_string(options.bf16) + " device=" + ir::device_name(options.device) +
      " fold=" + std::to_string(static_cast<bool>(options.evaluate_constant)) +
      " layout=" + std::to_string(static_cast<bool>(options.infer_types)) +
      " out=" + std::to_string(static_cast<bool>(options.can_write_into_buffer)) + " disabled=";
  for (const std::string& name : options.disabled)
    text += name + ",";
  return text;
}

// An entry: the graph's text and each constant's metadata, then the constants' bytes, each at a
// multiple of kAlignment from the entry's start. `owner` keeps `bytes` alive: where the bytes
// are aligned (a mapped disk-cache entry) the constants are views of them, else copies.
CachedGraph parse_entry(std::string_view bytes, const std::shared_ptr<const void>& owner) {
  EntryReader in(bytes);
  if (in.take<uint32_t>() != kEntryVersion) throw std::runtime_error("another entry version");
  CachedGraph cached;
  cached.layout_conversions = in.take<int32_t>();
  cached.graph = ir::parse_graph(std::string(in.take_bytes(in.take<uint64_t>())));
  const uint32_t count = in.take<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    const auto options = at::TensorOptions().dtype(static_cast<at::ScalarType>(in.take<int32_t>()));
    const uint32_t dims = in.take<uint32_t>();
    std::vector<int64_t> sizes(dims), strides(dims);
    for (auto& size : sizes)
      size = in.take<int64_t>();
    for (auto& stride : strides)
      stride = in.take<int64_t>();
    const uint64_t offset = in.take<uint64_t>();
    const std::string_view data = in.at(offset, in.take<uint64_t>());
    at::Tensor t;
    if (reinterpret_cast<uintptr_t>(data.data()) % kAlignment == 0) {
      t = at::from_blob(
          const_cast<char*>(data.data()), sizes, strides, [owner](void*) {}, options);
    } else {
      t = at::empty_strided(sizes, strides, options);
    }
    if (data.size() != span_of(t).size()) throw std::runtime_error("a constant's size is wrong");
    if (t.const_data_ptr() != data.data())
      std::memcpy(t.mutable_data_ptr(), data.data(), data.size());
    cached.constants.push_back(std::move(t));
  }
  return cached;
}

}  // namespace

std::string graph_key(const ir::Graph& graph, const std::vector<at::Tensor>& constants,
                      const PipelineOptions& options) {
  if (!jit::code_bundle_in_use() && !jit::DiskCache::instance().enabled()) return "";
  std::string text = "kiln graph " + std::to_string(kEntryVersion) + "\n" + jit::code_identity() +
                     "torch " + TORCH_VERSION + "\nthreads " +
                     std::to_string(at::get_num_threads()) + "\n" + switches(options) + "\n";
  for (const at::Tensor& t : constants) {
    if (!storable(t)) return "";
    text += std::string(c10::toString(t.scalar_type())) + " " + c10::str(t.sizes()) + " " +
            c10::str(t.strides()) + " " + jit::content_hash(span_of(t)) + "\n";
  }
  return jit::content_hash(text + ir::print_graph(graph));
}

std::optional<CachedGraph> load_graph(const std::string& key) {
  jit::CodeBundle* bundle = jit::code_bundle_in_use();
  std::shared_ptr<const std::string_view> bytes = bundle ? bundle->find(key) : nullptr;
  jit::DiskCache& cache = jit::DiskCache::instance();
  if (!bytes && cache.enabled()) bytes = cache.map(key);
  if (!bytes) return std::nullopt;
  try {
    CachedGraph cached = parse_entry(*bytes, bytes);
    if (bundle) bundle->add(key, bytes);  // the mapped entry itself, not a copy
    return cached;
  } catch (const std::exception& e) {
    // The disk cache checked its bytes, so this is another build's layout or a bug: rebuilt.
    log(LogLevel::Warn, std::string("an optimized graph kept for a region does not read (") +
                            e.what() + "); deleted, its passes run again");
    cache.remove(key);
    return std::nullopt;
  }
}

void store_graph(const std::string& key, const ir::Graph& graph,
                 const std::vector<at::Tensor>& constants, int layout_conversions,
                 double pass_seconds) {
  jit::CodeBundle* bundle = jit::code_bundle_in_use();
  jit::DiskCache& cache = jit::DiskCache::instance();
  if (!bundle && !cache.enabled()) return;
  // The constants the graph still reads, renumbered in order.
  std::unique_ptr<ir::Graph> kept = graph.clone();
  std::map<int64_t, int64_t> renumbered;
  std::vector<const at::Tensor*> stored;
  for (ir::Node* node : kept->nodes()) {
    if (node->op() != ir::kConstantOp) continue;
    const auto* index = std::get_if<int64_t>(node->find_attr("index"));
    if (!index || *index < 0 || *index >= static_cast<int64_t>(constants.size())) return;
    auto [at, fresh] = renumbered.emplace(*index, static_cast<int64_t>(stored.size()));
    if (fresh) {
      if (!storable(constants[*index])) return;
      stored.push_back(&constants[*index]);
    }
    node->set_attr("index", at->second);
  }
  size_t constant_bytes = 0;
  for (const at::Tensor* t : stored)
    constant_bytes += span_of(*t).size();
  constexpr double kKeptBytesPerPassSecond = 1e9;
  const bool pays = pass_seconds * kKeptBytesPerPassSecond >= static_cast<double>(constant_bytes);
  if (!bundle && !pays) {
    log(LogLevel::Debug, "graph cache: not kept (" + std::to_string(constant_bytes >> 20) +
                             " MB of constants would load slower than the passes ran)");
    return;
  }
  std::string head;
  put(head, kEntryVersion);
  put(head, static_cast<int32_t>(layout_conversions));
  const std::string text = ir::print_graph(*kept);
  put(head, static_cast<uint64_t>(text.size()));
  head += text;
  put(head, static_cast<uint32_t>(stored.size()));
  size_t head_size = head.size();
  for (const at::Tensor* t : stored)
    head_size += sizeof(int32_t) + sizeof(uint32_t) + 2 * t->dim() * sizeof(int64_t) + 16;
  auto aligned = [](size_t offset) { return (offset + kAlignment - 1) / kAlignment * kAlignment; };
  size_t offset = aligned(head_size);
  std::vector<std::string_view> data;
  std::vector<size_t> offsets;
  for (const at::Tensor* t : stored) {
    put(head, static_cast<int32_t>(t->scalar_type()));
    put(head, static_cast<uint32_t>(t->dim()));
    for (int64_t size : t->sizes())
      put(head, size);
    for (int64_t stride : t->strides())
      put(head, stride);
    data.push_back(span_of(*t));
    offsets.push_back(offset);
    put(head, static_cast<uint64_t>(offset));
    put(head, static_cast<uint64_t>(data.back().size()));
    offset = aligned(offset + data.back().size());
  }
  static const std::string zeros(kAlignment, '\0');
  std::vector<std::string_view> parts = {head};
  size_t written = head.size();
  for (size_t i = 0; i < data.size(); ++i) {
    parts.push_back(std::string_view(zeros).substr(0, offsets[i] - written));
    parts.push_back(data[i]);
    written = offsets[i] + data[i].size();
  }
  if (bundle) {
    std::string joined;
    for (std::string_view part : parts)
      joined += part;
    bundle->add(key, joined);
  }
  if (cache.enabled() && pays) cache.put(key, parts);
}

void forget_graph(const std::string& key) {
  jit::DiskCache& cache = jit::DiskCache::instance();
  if (cache.enabled()) cache.remove(key);
}

#else  // no LLVM: no disk cache and no packages' code

std::string graph_key(const ir::Graph&, const std::vector<at::Tensor>&, const PipelineOptions&) {
  return "";
}
std::optional<CachedGraph> load_graph(const std::string&) {
  return std::nullopt;
}
void store_graph(const std::string&, const ir::Graph&, const std::vector<at::Tensor>&, int,
                 double) {}
void forget_graph(const std::string&) {}

#endif

}  // namespace kiln
