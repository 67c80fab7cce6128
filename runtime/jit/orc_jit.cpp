#include "runtime/jit/orc_jit.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <llvm/ADT/SmallString.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "kiln/error.h"
#include "passes/base/environment.h"
#include "runtime/jit/code_bundle.h"
#include "runtime/jit/disk_cache.h"
#include "runtime/jit/object_cache.h"

namespace kiln::jit {
namespace {

// The one place where LLVM's errors become kiln's.
[[noreturn]] void throw_backend(const std::string& what, llvm::Error error) {
  throw Error(ErrorKind::Backend, what + ": " + llvm::toString(std::move(error)));
}

// ORC reports some errors to the session instead of to the lookup that failed: for a missing
// external symbol the lookup says only "Failed to materialize symbols". Materialization runs on
// the thread whose lookup started it (see the InPlaceTaskDispatcher below), so add() collects
// these per thread and puts them into its kiln::Error; others go to stderr, as ORC's default does.
thread_local std::string* session_errors = nullptr;

std::atomic<int64_t> modules_compiled{0}, modules_loaded{0};  // OrcJit::counts

void report_session_error(llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  if (session_errors) {
    *session_errors += "; " + message;
  } else {
    llvm::errs() << "kiln: LLVM JIT error: " << message << "\n";
  }
}

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();  // kernels with inline asm
  });
}

llvm::orc::JITTargetMachineBuilder machine_builder() {
  initialize_llvm();
  const HostTarget& host = host_target();
  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(host.triple)};
  builder.setCPU(host.cpu);
  builder.setFeatures(host.features);
  // What JITLink (LLJIT's linker on x86-64 ELF) links; set here too so that emit_assembly shows
  // the code the JIT runs.
  builder.setRelocationModel(llvm::Reloc::PIC_);
  builder.setCodeModel(llvm::CodeModel::Small);
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return builder;
}

// A new TargetMachine for each use: TargetMachine is not thread-safe, and making one costs far
// less than optimizing a module.
std::unique_ptr<llvm::TargetMachine> create_target_machine() {
  auto machine = machine_builder().createTargetMachine();
  if (!machine) throw_backend("cannot create the host target machine", machine.takeError());
  return std::move(*machine);
}

void verify(const llvm::Module& module) {
  std::string message;
  llvm::raw_string_ostream out(message);
  if (llvm::verifyModule(module, &out))
    throw Error(ErrorKind::Backend, "invalid LLVM IR: " + message);
}

void set_host_target(llvm::Module& module, const llvm::TargetMachine& machine) {
  if (module.getTargetTriple().empty()) module.setTargetTriple(machine.getTargetTriple().str());
  if (module.getDataLayoutStr().empty()) module.setDataLayout(machine.createDataLayout());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw Error(ErrorKind::InvalidInput, "cannot write " + path + ": " + std::strerror(errno));
}

// Any symbol the module defines: looking one up compiles the whole module.
std::string any_definition(const llvm::Module& module) {
  for (const llvm::GlobalValue& value : module.global_values()) {
    if (!value.isDeclarationForLinker() && !value.hasLocalLinkage() && value.hasName()) {
      return value.getName().str();
    }
  }
  return {};
}

// `host`'s features with `off` removed, and every feature that needs one of them (AVX-512 needs
// AVX2): LLVM's own feature table decides, so the set stays one a CPU can have.
std::string without_features(const HostTarget& host, const std::set<std::string>& off) {
  initialize_llvm();
  std::string features = host.features;
  for (const std::string& name : off)
    features += ",-" + name;
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (!target) throw Error(ErrorKind::Backend, "no LLVM target for " + host.triple + ": " + error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(host.triple, host.cpu, features));
  std::vector<std::string> kept;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    const std::string name = feature.getKey().str();
    kept.push_back((info->checkFeatures("+" + name) ? "+" : "-") + name);
  }
  std::sort(kept.begin(), kept.end());
  std::string text;
  for (const std::string& feature : kept)
    text += (text.empty() ? "" : ",") + feature;
  return text;
}

}  // namespace

const HostTarget& host_target() {
  static const HostTarget host = [] {
    HostTarget target;
    target.triple = llvm::sys::getProcessTriple();
    target.cpu = llvm::sys::getHostCPUName().str();
    const llvm::StringMap<bool> detected = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> features;
    for (const auto& feature : detected)
      features.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
    // Sorted so that dumps of the same kernel on the same machine are identical (and every
    // removal comes after the additions, as without_features needs).
    std::sort(features.begin(), features.end());
    for (const std::string& feature : features)
      target.features += (target.features.empty() ? "" : ",") + feature;
    const std::set<std::string>& off = environment().cpu_features_off;
    for (const std::string& name : off) {
      if (!detected.contains(name))
        log(LogLevel::Warn,
            "KILN_CPU_FEATURES names '-" + name + "', a feature LLVM does not know");
    }
    if (!off.empty()) target.features = without_features(target, off);
    return target;
  }();
  return host;
}

void optimize_module(llvm::Module& module) {
  verify(module);
  std::unique_ptr<llvm::TargetMachine> machine = create_target_machine();
  set_host_target(module, *machine);
  // The attributes make the vectorizers' cost model use the host's vector width (AVX2, AVX-512),
  // and keep a dumped .ll reproducible with opt/llc on another machine.
  const HostTarget& host = host_target();
  for (llvm::Function& function : module) {
    if (function.isDeclaration()) continue;
    if (!function.hasFnAttribute("target-cpu")) function.addFnAttr("target-cpu", host.cpu);
    if (!function.hasFnAttribute("target-features")) {
      function.addFnAttr("target-features", host.features);
    }
  }

  llvm::PipelineTuningOptions tuning;
  // Both are off in a default PipelineTuningOptions (clang turns them on at -O2 and -O3); without
  // them O3 does not vectorize.
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  // Declared in this order so they are destroyed in the reverse order of their dependencies.
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(machine.get(), tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
}

std::string emit_assembly(const llvm::Module& module) {
  verify(module);
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
  std::unique_ptr<llvm::TargetMachine> machine = create_target_machine();
  set_host_target(*copy, *machine);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    throw Error(ErrorKind::Backend, "the host target machine cannot emit assembly");
  }
  passes.run(*copy);
  return std::string(text.str());
}

JitModule::~JitModule() {
  // Removing the dylib removes its ResourceTracker: JITLink frees the code and data memory.
  llvm::orc::ExecutionSession& session = jit_.getExecutionSession();
  if (llvm::Error error = session.removeJITDylib(dylib_)) session.reportError(std::move(error));
}

void* JitModule::lookup(const std::string& name) const {
  auto address = jit_.lookup(dylib_, name);
  if (!address) throw_backend("cannot find '" + name + "' in the JIT module", address.takeError());
  return address->toPtr<void*>();
}

OrcJit& OrcJit::instance() {
  static OrcJit* jit = new OrcJit();  // deliberately leaked, see the header
  return *jit;
}

OrcJit::OrcJit() {
  // Compiling and linking run on the thread that calls add(), not on a thread pool LLVM would
  // start for concurrent compilation: add() sees the errors reported while linking, and no
  // thread outlives a compile (compile_kernels adds a plan's modules from threads it starts and
  // joins: backend/codegen/llvm/compile_groups.h).
  auto process = llvm::orc::SelfExecutorProcessControl::Create(
      nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>());
  if (!process) throw_backend("cannot create the LLVM JIT", process.takeError());
  auto jit = llvm::orc::LLJITBuilder()
                 .setExecutorProcessControl(std::move(*process))
                 .setJITTargetMachineBuilder(machine_builder())
                 // One TargetMachine per compile, so modules added on several threads compile at
                 // the same time instead of racing on one.
                 .setSupportConcurrentCompilation(true)
                 // The compiler LLJIT picks for that, reporting each object to the disk cache.
                 .setCompileFunctionCreator(
                     [](llvm::orc::JITTargetMachineBuilder machine)
                         -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                       return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(machine),
                                                                                &object_store());
                     })
                 // Kernels have no static constructors and need no ORC runtime: no platform.
                 .setPlatformSetUp(
                     [](llvm::orc::LLJIT& jit) { return llvm::orc::setUpInactivePlatform(jit); })
                 .create();
  if (!jit) throw_backend("cannot create the LLVM JIT", jit.takeError());
  jit_ = std::move(*jit);
  triple_ = jit_->getTargetTriple().str();
  jit_->getExecutionSession().setErrorReporter(
      [](llvm::Error error) { report_session_error(std::move(error)); });

  // The process-symbols dylib (in every module's link order) already searches the process, which
  // has libm when libstdc++ is loaded; naming it makes exp, erf, tanh, expf, ... resolve even in
  // a host that does not. No libm.so.6 (musl) is fine: there libm is part of libc.
  auto libm = llvm::orc::DynamicLibrarySearchGenerator::Load(
      "libm.so.6", jit_->getDataLayout().getGlobalPrefix());
  if (libm) {
    jit_->getProcessSymbolsJITDylib()->addGenerator(std::move(*libm));
  } else {
    llvm::consumeError(libm.takeError());
  }
}

const llvm::DataLayout& OrcJit::data_layout() const {
  return jit_->getDataLayout();
}

const std::string& OrcJit::triple() const {
  return triple_;
}

std::unique_ptr<JitModule> OrcJit::add(std::unique_ptr<llvm::Module> module,
                                       std::unique_ptr<llvm::LLVMContext> context,
                                       const std::string& dump_prefix) {
  if (!module || !context || &module->getContext() != context.get()) {
    throw Error(ErrorKind::Internal, "OrcJit::add needs a module and the context it was built in");
  }
  const std::string symbol = any_definition(*module);
  // Dumps show what was compiled: a module dumped is never taken from a cache or a bundle.
  DiskCache& cache = DiskCache::instance();
  CodeBundle* bundle = code_bundle_in_use();
  if (dump_prefix.empty() && (cache.enabled() || bundle)) {
    const std::string key = object_key(*module);
    if (std::unique_ptr<JitModule> loaded = load(key, symbol)) return loaded;
    store_object_as(*module, key);
  }
  // Optimized here, not in an IRTransformLayer: a kiln::Error must not unwind through LLVM's
  // frames (built without exceptions), and the dumps must show what runs.
  optimize_module(*module);
  if (!dump_prefix.empty()) {
    std::string text;
    llvm::raw_string_ostream out(text);
    module->print(out, nullptr);
    write_file(dump_prefix + ".ll", text);
    write_file(dump_prefix + ".s", emit_assembly(*module));
  }

  auto dylib = jit_->createJITDylib("kiln_module_" + std::to_string(next_dylib_++));
  if (!dylib) throw_backend("cannot create a JITDylib", dylib.takeError());
  // From here on, result's destructor removes the dylib if compiling fails.
  std::unique_ptr<JitModule> result(new JitModule(*jit_, *dylib));
  llvm::orc::ThreadSafeModule owned(std::move(module), std::move(context));
  if (llvm::Error error = jit_->addIRModule(*dylib, std::move(owned))) {
    throw_backend("cannot add the module to the JIT", std::move(error));
  }
  if (!symbol.empty()) {
    std::string reported;
    session_errors = &reported;
    auto address = jit_->lookup(*dylib, symbol);
    session_errors = nullptr;
    if (!address) {
      throw Error(ErrorKind::Backend,
                  "cannot compile the module: " + llvm::toString(address.takeError()) + reported);
    }
  }
  ++modules_compiled;
  return result;
}

std::unique_ptr<JitModule> OrcJit::load(const std::string& key, const std::string& symbol) {
  CodeBundle* bundle = code_bundle_in_use();
  if (bundle) {
    if (CodeBundle::Entry object = bundle->find(key)) {
      std::string failure;
      if (std::unique_ptr<JitModule> linked = link(*object, symbol, failure)) return linked;
      // Its key matched, so this is a bug (or a package from a mislabelled CPU): compile it.
      log(LogLevel::Warn, "a package's code module does not link (" + failure + "); compiling it");
    }
  }
  DiskCache& cache = DiskCache::instance();
  if (!cache.enabled()) return nullptr;
  // Mapped, not read: the JIT copies the object once, and a bundle keeps the mapping itself.
  CodeBundle::Entry object = cache.map(key);
  if (!object) return nullptr;
  std::string failure;
  std::unique_ptr<JitModule> linked = link(*object, symbol, failure);
  if (!linked) {
    // Its bytes passed the checks but do not link: not kept, and compiled again.
    log(LogLevel::Warn,
        "disk cache: an entry that does not link was deleted (" + failure + "); compiling again");
    cache.remove(key);
    return nullptr;
  }
  if (bundle) bundle->add(key, std::move(object));
  return linked;
}

std::unique_ptr<JitModule> OrcJit::link(std::string_view object, const std::string& symbol,
                                        std::string& failure) {
  auto dylib = jit_->createJITDylib("kiln_module_" + std::to_string(next_dylib_++));
  if (!dylib) throw_backend("cannot create a JITDylib", dylib.takeError());
  std::unique_ptr<JitModule> result(new JitModule(*jit_, *dylib));
  if (llvm::Error error = jit_->addObjectFile(
          *dylib,
          llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size())))) {
    failure = llvm::toString(std::move(error));
  } else if (!symbol.empty()) {
    std::string reported;
    session_errors = &reported;
    auto address = jit_->lookup(*dylib, symbol);
    session_errors = nullptr;
    if (!address) failure = llvm::toString(address.takeError()) + reported;
  }
  if (!failure.empty()) return nullptr;  // result's destructor removes the dylib
  result->loaded_ = true;
  ++modules_loaded;
  return result;
}

OrcJit::Counts OrcJit::counts() {
  return {modules_compiled.load(), modules_loaded.load()};
}

}  // namespace kiln::jit
