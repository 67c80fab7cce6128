#include "backend/api/package.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>

#include "backend/api/compiled_module_impl.h"
#include "backend/api/environment.h"
#include "backend/api/package_file.h"
#include "passes/base/mapped_file.h"
#include "passes/base/strings.h"

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/code_bundle.h"
#include "runtime/jit/object_cache.h"
#endif

namespace kiln {
namespace {

// A tensor in a package's signature: ("kiln.tensor", sizes, strides, dtype, device,
// requires_grad); a list of tensors: ("kiln.tensor_list", (tensor, ...)).
constexpr const char* kTensorTag = "kiln.tensor";
constexpr const char* kTensorListTag = "kiln.tensor_list";
// A signature: ("kiln.signature", (input, ...), grad mode, CPU autocast, CUDA autocast): the
// global state a specialization folds is part of its signature (signature.h), so a model saved
// after calls under torch.no_grad() compiles its no_grad specialization at load. (A bare tuple of
// inputs, as the first packages held them, is compiled with grad mode on and no autocast.)
constexpr const char* kSignatureTag = "kiln.signature";

bool holds_tensor(const c10::IValue& value) {
  if (value.isTensor() || value.isTensorList()) return true;
  if (value.isTuple()) {
    for (const c10::IValue& element : value.toTupleRef().elements())
      if (holds_tensor(element)) return true;
  }
  if (value.isList()) {
    for (const c10::IValue& element : value.toListRef())
      if (holds_tensor(element)) return true;
  }
  if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict())
      if (holds_tensor(entry.key()) || holds_tensor(entry.value())) return true;
  }
  return false;
}

std::optional<c10::IValue> describe(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined() || t.layout() != at::kStrided || t.is_quantized()) return std::nullopt;
    return c10::ivalue::Tuple::create(
        {kTensorTag, c10::List<int64_t>(t.sizes()), c10::List<int64_t>(t.strides()),
         static_cast<int64_t>(t.scalar_type()), t.device().str(), t.requires_grad()});
  }
  if (value.isTensorList()) {
    std::vector<c10::IValue> tensors;
    for (const at::Tensor& t : value.toTensorVector()) {
      std::optional<c10::IValue> described = describe(t);
      if (!described) return std::nullopt;
      tensors.push_back(std::move(*described));
    }
    return c10::ivalue::Tuple::create({kTensorListTag, c10::ivalue::Tuple::create(tensors)});
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      std::optional<c10::IValue> described = describe(element);
      if (!described) return std::nullopt;
      elements.push_back(std::move(*described));
    }
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  if (holds_tensor(value)) return std::nullopt;  // a dict or generic list of tensors
  if (value.isNone() || value.isBool() || value.isInt() || value.isDouble() || value.isString() ||
      value.isList() || value.isGenericDict() || value.isDevice()) {
    return value;
  }
  return std::nullopt;
}

bool tagged(const c10::IValue& value, const char* tag) {
  if (!value.isTuple()) return false;
  const auto& elements = value.toTupleRef().elements();
  return !elements.empty() && elements[0].isString() && elements[0].toStringRef() == tag;
}

// Zeros with a described tensor's metadata (a signature depends on nothing else).
at::Tensor zeros_like_described(const c10::IValue& described) {
  const auto& fields = described.toTupleRef().elements();
  const std::vector<int64_t> sizes = fields[1].toIntVector();
  const std::vector<int64_t> strides = fields[2].toIntVector();
  int64_t storage = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) storage = 0;
    if (storage) storage += (sizes[i] - 1) * strides[i];
  }
  const auto options = at::TensorOptions()
                           .dtype(static_cast<at::ScalarType>(fields[3].toInt()))
                           .device(c10::Device(fields[4].toStringRef()));
  // Over a storage of its own size: strides that overlap (an expanded input) stay as they were.
  at::Tensor tensor = at::zeros({storage}, options).as_strided(sizes, strides);
  if (fields[5].toBool()) tensor.requires_grad_(true);
  return tensor;
}

c10::IValue rebuild(const c10::IValue& described) {
  if (tagged(described, kTensorTag)) return zeros_like_described(described);
  if (tagged(described, kTensorListTag)) {
    c10::List<at::Tensor> tensors;
    for (const c10::IValue& t : described.toTupleRef().elements()[1].toTupleRef().elements())
      tensors.push_back(zeros_like_described(t));
    return tensors;
  }
  if (described.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const c10::IValue& element : described.toTupleRef().elements())
      elements.push_back(rebuild(element));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return described;
}

// Sets the global state a signature was compiled under, and restores the caller's.
class SignatureState {
 public:
  explicit SignatureState(const c10::IValue& signature)
      : grad_(at::GradMode::is_enabled()),
        autocast_cpu_(at::autocast::is_autocast_enabled(at::kCPU)),
        autocast_cuda_(at::autocast::is_autocast_enabled(at::kCUDA)) {
    if (!tagged(signature, kSignatureTag)) return;
    const auto& fields = signature.toTupleRef().elements();
    at::GradMode::set_enabled(fields[2].toBool());
    at::autocast::set_autocast_enabled(at::kCPU, fields[3].toBool());
    at::autocast::set_autocast_enabled(at::kCUDA, fields[4].toBool());
  }
  ~SignatureState() {
    at::GradMode::set_enabled(grad_);
    at::autocast::set_autocast_enabled(at::kCPU, autocast_cpu_);
    at::autocast::set_autocast_enabled(at::kCUDA, autocast_cuda_);
  }
  SignatureState(const SignatureState&) = delete;
  SignatureState& operator=(const SignatureState&) = delete;

 private:
  bool grad_, autocast_cpu_, autocast_cuda_;
};

const c10::IValue& signature_inputs(const c10::IValue& signature) {
  return tagged(signature, kSignatureTag) ? signature.toTupleRef().elements()[1] : signature;
}

// Compiles each signature, under the state it was compiled under, for zeros of its inputs
// (running them only where the interpreter runs glue between regions); one that fails (a model
// whose ops reject zeros) is left to compile at its first real call.
void compile_signatures(const CompiledModule& compiled, const std::vector<c10::IValue>& signatures,
                        const std::string& context) {
  for (size_t i = 0; i < signatures.size(); ++i) {
    try {
      std::vector<c10::IValue> inputs;
      for (const c10::IValue& described : signature_inputs(signatures[i]).toTupleRef().elements())
        inputs.push_back(rebuild(described));
      SignatureState state(signatures[i]);
      CompiledModuleAccess::impl(compiled).prepare(std::move(inputs));
    } catch (const std::exception& e) {
      log(LogLevel::Warn, context + ": input signature " + std::to_string(i) +
                              " did not compile ahead (" + e.what() +
                              "); it compiles at its first call");
    }
  }
}

// The package mapped into memory (mapped_file.h): its weights become tensors over it.
std::shared_ptr<const std::string_view> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  std::shared_ptr<const std::string_view> mapped;
  if (fd >= 0 && ::fstat(fd, &st) == 0) mapped = map_private(fd, static_cast<size_t>(st.st_size));
  const std::string why = std::strerror(errno);
  if (fd >= 0) ::close(fd);
  if (!mapped)
    throw Error(ErrorKind::InvalidInput, "cannot load kiln package '" + path + "': " + why);
  return mapped;
}

// Bytes in memory as a stream buffer, for torch::jit::load (which seeks), without copying them.
class ViewBuffer : public std::streambuf {
 public:
  explicit ViewBuffer(std::string_view bytes) {
    char* begin = const_cast<char*>(bytes.data());
    setg(begin, begin, begin + bytes.size());
  }

 private:
  std::streambuf::pos_type seekoff(std::streambuf::off_type offset, std::ios_base::seekdir dir,
                                   std::ios_base::openmode) override {
    const std::streambuf::off_type base = dir == std::ios_base::beg   ? 0
                                          : dir == std::ios_base::cur ? gptr() - eback()
                                                                      : egptr() - eback();
    return seekpos(std::streambuf::pos_type(base + offset), std::ios_base::in);
  }
  std::streambuf::pos_type seekpos(std::streambuf::pos_type position,
                                   std::ios_base::openmode) override {
    const std::streambuf::off_type at = position;
    if (at < 0 || at > egptr() - eback()) return std::streambuf::pos_type(-1);
    setg(eback(), eback() + at, egptr());
    return position;
  }
};

// Written whole to a file of its own and renamed into place: a reader never sees half of it.
void write_file(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      const std::string why = std::strerror(errno);
      std::remove(temporary.c_str());
      throw Error(ErrorKind::InvalidInput, "cannot write kiln package '" + path + "': " + why);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Error(ErrorKind::InvalidInput, "cannot write kiln package '" + path + "': " + why);
  }
}

std::string pickled(const std::vector<c10::IValue>& signatures) {
  const std::vector<char> bytes = torch::jit::pickle_save(c10::ivalue::Tuple::create(signatures));
  return std::string(bytes.begin(), bytes.end());
}

std::vector<c10::IValue> unpickled(const std::string& bytes, const std::string& path) {
  if (bytes.empty()) return {};
  try {
    return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()))
        .toTupleRef()
        .elements()
        .vec();
  } catch (const std::exception& e) {
    throw Error(ErrorKind::InvalidInput, "cannot load kiln package '" + path +
                                             "': its input signatures do not read (" + e.what() +
                                             ")");
  }
}

#ifdef KILN_HAVE_LLVM
// What differs between the identity a package's code was made for and this process's.
std::string identity_difference(const std::string& saved, const std::string& here) {
  static const char* what[] = {"code format",  "target triple", "CPU",
                               "CPU features", "LLVM version",  "kiln build"};
  std::istringstream a(saved), b(here);
  std::string differs;
  std::string line_a, line_b;
  for (const char* name : what) {
    std::getline(a, line_a);
    std::getline(b, line_b);
    if (line_a != line_b) differs += std::string(differs.empty() ? "" : " and ") + name;
  }
  return differs.empty() ? "code identity" : differs;
}
#endif

}  // namespace

std::optional<c10::IValue> describe_for_package(const std::vector<c10::IValue>& inputs) {
  std::optional<c10::IValue> described = describe(c10::ivalue::Tuple::create(inputs));
  if (!described) return std::nullopt;
  return c10::ivalue::Tuple::create(
      {kSignatureTag, std::move(*described), at::GradMode::is_enabled(),
       at::autocast::is_autocast_enabled(at::kCPU), at::autocast::is_autocast_enabled(at::kCUDA)});
}

std::string package_bytes(const CompiledModule& compiled) {
  const CompiledModule::Impl& impl = CompiledModuleAccess::impl(compiled);
  std::vector<c10::IValue> signatures;
  {
    std::lock_guard lock(impl.signatures_mutex);
    signatures = impl.signatures;
  }
  PackageContents contents;
  contents.options = impl.options.to_string();
  std::ostringstream archive_stream;
  impl.original_module().save(archive_stream);
  const std::string archive = std::move(archive_stream).str();
  contents.module = archive;
  contents.signatures = pickled(signatures);
#ifdef KILN_HAVE_LLVM
  // The signatures compile again from the module under a bundle, as a load will compile them,
  // so that the bundle's modules are the ones a load asks for (mostly from the disk cache).
  // `entries` holds the bytes contents.entries views until they are encoded.
  std::map<std::string, jit::CodeBundle::Entry> entries;
  if (!signatures.empty()) {
    auto bundle = std::make_shared<jit::CodeBundle>(at::get_num_threads());
    CompileOptions options = impl.options;
    options.example_inputs.clear();
    CompiledModule replay = compile(impl.original_module(), options);
    CompiledModuleAccess::impl(replay).package_code = bundle;
    compile_signatures(replay, signatures, "saving a package");
    contents.identity = jit::code_identity();
    contents.grouping_threads = bundle->grouping_threads();
    entries = bundle->entries();
    for (const auto& [key, entry] : entries)
      contents.entries[key] = *entry;
  }
#endif
  log(LogLevel::Info, "package: " + std::to_string(signatures.size()) + " input signatures, " +
                          std::to_string(contents.entries.size()) + " entries");
  return encode_package(contents);
}

void save(const CompiledModule& compiled, const std::string& path) {
  write_file(path, package_bytes(compiled));
}

CompiledModule load(const std::string& path) {
  return load_package_bytes(map_file(path), path);
}

CompiledModule load_package_bytes(std::shared_ptr<const std::string_view> bytes,
                                  const std::string& path) {
  const DebugClock clock("package '" + path + "'");
  // The checksum runs beside the sections' decoding and the module's read (the longest step of
  // a load); nothing read is used before it has passed, and where both fail, its error is the
  // one raised.
  check_package_header(*bytes, path);
  std::future<void> checked =
      std::async(std::launch::async, [&] { check_package_checksum(*bytes, path); });
  PackageContents contents;
  torch::jit::Module module;
  // The module is read twice: here for the compiled module's frozen copy, which takes its
  // tensors, and again only if the caller asks for original() (unwrap, attribute access).
  std::function<torch::jit::Module()> read_module;
  try {
    contents = decode_package_unchecked(*bytes, path);
    read_module = [bytes, archive = contents.module, path] {
      try {
        ViewBuffer buffer(archive);
        std::istream in(&buffer);
        return torch::jit::load(in);
      } catch (const c10::Error& e) {
        throw Error(ErrorKind::InvalidInput, "cannot load kiln package '" + path +
                                                 "': its module does not load (" +
                                                 e.what_without_backtrace() + ")");
      }
    };
    module = read_module();
  } catch (...) {
    checked.get();
    throw;
  }
  checked.get();
  clock.step("checked, module loaded");
  CompiledModule compiled =
      compile_owned(module, CompileOptions::parse(contents.options), read_module);
  clock.step("module captured");
#ifdef KILN_HAVE_LLVM
  if (!contents.entries.empty()) {
    const std::string here = jit::code_identity();
    if (contents.identity == here) {
      auto bundle = std::make_shared<jit::CodeBundle>(static_cast<int>(contents.grouping_threads));
      // The entries are views of the package's bytes, which they keep alive.
      for (const auto& [key, entry] : contents.entries)
        bundle->add(key, shared_view(bytes, entry));
      CompiledModuleAccess::impl(compiled).package_code = std::move(bundle);
    } else {
      log(LogLevel::Warn, "package '" + path + "' holds code that does not fit here (it was " +
                              "made with another " + identity_difference(contents.identity, here) +
                              "); its input signatures compile here instead");
    }
  }
#endif
  compile_signatures(compiled, unpickled(contents.signatures, path), "package '" + path + "'");
  clock.step("input signatures compiled");
  return compiled;
}

}  // namespace kiln
