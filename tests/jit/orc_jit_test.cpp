#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include "kiln/error.h"
#include "runtime/jit/code_bundle.h"
#include "runtime/jit/disk_cache.h"
#include "runtime/jit/object_cache.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::jit {
namespace {

// A module with the context it lives in, as the code generator hands them to OrcJit::add.
struct IrModule {
  std::unique_ptr<llvm::LLVMContext> context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = std::make_unique<llvm::Module>("test", *context);
};

std::unique_ptr<JitModule> add(IrModule ir, const std::string& dump_prefix = {}) {
  return OrcJit::instance().add(std::move(ir.module), std::move(ir.context), dump_prefix);
}

// Runs `f` and returns the kiln::Error it throws.
Error error_from(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no kiln::Error was thrown";
  return Error(ErrorKind::Internal, "no error");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

llvm::Function* new_function(llvm::Module& module, const std::string& name, llvm::Type* result,
                             std::vector<llvm::Type*> params) {
  auto* type = llvm::FunctionType::get(result, params, false);
  return llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
}

// define i32 @<name>() { ret i32 <value> }
void define_constant(llvm::Module& module, const std::string& name, int value) {
  llvm::IRBuilder<> b(module.getContext());
  llvm::Function* f = new_function(module, name, b.getInt32Ty(), {});
  b.SetInsertPoint(llvm::BasicBlock::Create(module.getContext(), "entry", f));
  b.CreateRet(b.getInt32(value));
}

// define i32 @add(i32 %x, i32 %y) { ret i32 (%x + %y) }
void define_add(llvm::Module& module) {
  llvm::IRBuilder<> b(module.getContext());
  llvm::Function* f = new_function(module, "add", b.getInt32Ty(), {b.getInt32Ty(), b.getInt32Ty()});
  b.SetInsertPoint(llvm::BasicBlock::Create(module.getContext(), "entry", f));
  b.CreateRet(b.CreateAdd(f->getArg(0), f->getArg(1)));
}

constexpr int kLoopSize = 1024;

// void @multiply_add(ptr noalias %a, ptr %b, ptr %c, ptr %d):
//   for i in [0, 1024): a[i] = b[i] * c[i] + d[i]
void define_multiply_add(llvm::Module& module) {
  llvm::LLVMContext& context = module.getContext();
  llvm::IRBuilder<> b(context);
  llvm::Type* ptr = b.getPtrTy();
  llvm::Function* f = new_function(module, "multiply_add", b.getVoidTy(), {ptr, ptr, ptr, ptr});
  f->addParamAttr(0, llvm::Attribute::NoAlias);
  auto* entry = llvm::BasicBlock::Create(context, "entry", f);
  auto* loop = llvm::BasicBlock::Create(context, "loop", f);
  auto* exit = llvm::BasicBlock::Create(context, "exit", f);
  b.SetInsertPoint(entry);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  auto load = [&](int arg) {
    return b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), f->getArg(arg), i));
  };
  llvm::Value* result = b.CreateFAdd(b.CreateFMul(load(1), load(2)), load(3));
  b.CreateStore(result, b.CreateGEP(b.getFloatTy(), f->getArg(0), i));
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(b.getInt64(0), entry);
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpULT(next, b.getInt64(kLoopSize)), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

// define <type> @<name>(<type> %x) { ret <type> call @<callee>(%x) }, with @<callee> declared.
void define_call(llvm::Module& module, const std::string& name, const std::string& callee,
                 llvm::Type* type) {
  llvm::IRBuilder<> b(module.getContext());
  llvm::FunctionCallee declared =
      module.getOrInsertFunction(callee, llvm::FunctionType::get(type, {type}, false));
  llvm::Function* f = new_function(module, name, type, {type});
  b.SetInsertPoint(llvm::BasicBlock::Create(module.getContext(), "entry", f));
  b.CreateRet(b.CreateCall(declared, {f->getArg(0)}));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh directory for this test's dumps.
std::filesystem::path dump_dir() {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("kiln_orc_jit_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(OrcJitTest, CallsAJittedFunction) {
  IrModule ir;
  define_add(*ir.module);
  auto code = add(std::move(ir));
  auto* f = reinterpret_cast<int (*)(int, int)>(code->lookup("add"));
  EXPECT_EQ(f(2, 3), 5);
}

TEST(OrcJitTest, MultiplyAddLoopComputesEveryElement) {
  IrModule ir;
  define_multiply_add(*ir.module);
  auto code = add(std::move(ir));
  auto* f = reinterpret_cast<void (*)(float*, const float*, const float*, const float*)>(
      code->lookup("multiply_add"));
  std::vector<float> a(kLoopSize), b(kLoopSize), c(kLoopSize), d(kLoopSize);
  for (int i = 0; i < kLoopSize; ++i) {
    b[i] = 0.5f * i;
    c[i] = 3.0f - i;
    d[i] = 1.0f / (i + 1);
  }
  f(a.data(), b.data(), c.data(), d.data());
  for (int i = 0; i < kLoopSize; ++i)
    EXPECT_FLOAT_EQ(a[i], b[i] * c[i] + d[i]) << "i=" << i;
}

TEST(OrcJitTest, VectorizesAFloatLoop) {
  IrModule ir;
  define_multiply_add(*ir.module);
  std::filesystem::path prefix = dump_dir() / "multiply_add";
  auto code = add(std::move(ir), prefix.string());
  std::string assembly = read_file(prefix.string() + ".s");
  // Every x86-64 host kiln supports has AVX2: 256-bit (ymm) or 512-bit (zmm) multiplies.
  EXPECT_TRUE(std::regex_search(assembly, std::regex(R"(vmulps\s+[^\n]*%[yz]mm)"))) << assembly;
}

TEST(OrcJitTest, OptimizeModuleTagsFunctionsWithTheHostCpu) {
  IrModule ir;
  define_add(*ir.module);
  optimize_module(*ir.module);
  llvm::Function* f = ir.module->getFunction("add");
  EXPECT_EQ(f->getFnAttribute("target-cpu").getValueAsString().str(), host_target().cpu);
  EXPECT_EQ(f->getFnAttribute("target-features").getValueAsString().str(), host_target().features);
  EXPECT_FALSE(host_target().cpu.empty());
}

TEST(OrcJitTest, EmitAssemblyLeavesTheModuleUnchanged) {
  IrModule ir;
  define_multiply_add(*ir.module);
  optimize_module(*ir.module);
  std::string before, after;
  llvm::raw_string_ostream before_out(before), after_out(after);
  ir.module->print(before_out, nullptr);
  EXPECT_TRUE(contains(emit_assembly(*ir.module), "multiply_add:"));
  ir.module->print(after_out, nullptr);
  EXPECT_EQ(before, after);
}

TEST(OrcJitTest, LookupOfAMissingSymbolThrowsBackend) {
  IrModule ir;
  define_add(*ir.module);
  auto code = add(std::move(ir));
  Error error = error_from([&] { code->lookup("no_such_function"); });
  EXPECT_EQ(error.kind(), ErrorKind::Backend);
  EXPECT_TRUE(contains(error.what(), "no_such_function")) << error.what();
}

TEST(OrcJitTest, LookupDoesNotFindProcessSymbols) {
  IrModule ir;
  define_add(*ir.module);
  auto code = add(std::move(ir));
  EXPECT_EQ(error_from([&] { code->lookup("malloc"); }).kind(), ErrorKind::Backend);
}

TEST(OrcJitTest, InvalidIrThrowsBackendWithTheVerifierMessage) {
  IrModule ir;
  llvm::IRBuilder<> b(*ir.context);
  llvm::Function* f = new_function(*ir.module, "broken", b.getInt32Ty(), {});
  b.SetInsertPoint(llvm::BasicBlock::Create(*ir.context, "entry", f));
  b.CreateRet(b.getInt64(1));  // returns i64 from a function of i32
  Error error = error_from([&] { add(std::move(ir)); });
  EXPECT_EQ(error.kind(), ErrorKind::Backend);
  EXPECT_TRUE(contains(error.what(), "invalid LLVM IR: ")) << error.what();
  EXPECT_TRUE(contains(error.what(), "return type")) << error.what();
}

TEST(OrcJitTest, UnresolvedExternalSymbolThrowsBackendFromAdd) {
  IrModule ir;
  define_call(*ir.module, "calls_nothing", "kiln_no_such_function",
              llvm::Type::getFloatTy(*ir.context));
  Error error = error_from([&] { add(std::move(ir)); });
  EXPECT_EQ(error.kind(), ErrorKind::Backend);
  EXPECT_TRUE(contains(error.what(), "kiln_no_such_function")) << error.what();
}

TEST(OrcJitTest, AddRejectsAModuleWithoutItsContext) {
  IrModule ir;
  define_add(*ir.module);
  auto other = std::make_unique<llvm::LLVMContext>();
  Error error = error_from([&] { OrcJit::instance().add(std::move(ir.module), std::move(other)); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
}

TEST(OrcJitTest, SymbolNameIsReusableAfterTheModuleIsDestroyed) {
  IrModule first;
  define_constant(*first.module, "value", 1);
  auto code = add(std::move(first));
  EXPECT_EQ(reinterpret_cast<int (*)()>(code->lookup("value"))(), 1);
  code.reset();
  IrModule second;
  define_constant(*second.module, "value", 2);
  code = add(std::move(second));
  EXPECT_EQ(reinterpret_cast<int (*)()>(code->lookup("value"))(), 2);
}

TEST(OrcJitTest, TwoLiveModulesMayDefineTheSameSymbol) {
  IrModule first, second;
  define_constant(*first.module, "value", 1);
  define_constant(*second.module, "value", 2);
  auto one = add(std::move(first));
  auto two = add(std::move(second));
  EXPECT_EQ(reinterpret_cast<int (*)()>(one->lookup("value"))(), 1);
  EXPECT_EQ(reinterpret_cast<int (*)()>(two->lookup("value"))(), 2);
}

TEST(OrcJitTest, DumpPrefixWritesOptimizedIrAndAssembly) {
  IrModule ir;
  define_add(*ir.module);
  std::filesystem::path prefix = dump_dir() / "kernel";
  auto code = add(std::move(ir), prefix.string());
  std::string ir_text = read_file(prefix.string() + ".ll");
  std::string assembly = read_file(prefix.string() + ".s");
  EXPECT_TRUE(contains(ir_text, "define i32 @add(")) << ir_text;
  EXPECT_TRUE(contains(ir_text, "\"target-cpu\"=\"" + host_target().cpu + "\"")) << ir_text;
  EXPECT_TRUE(contains(assembly, "add:")) << assembly;
}

TEST(OrcJitTest, UnwritableDumpPrefixThrowsInvalidInput) {
  IrModule ir;
  define_add(*ir.module);
  Error error = error_from([&] { add(std::move(ir), "/nonexistent_kiln_dir/kernel"); });
  EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
  EXPECT_TRUE(contains(error.what(), "/nonexistent_kiln_dir/kernel.ll")) << error.what();
}

TEST(OrcJitTest, CallsLibmExpf) {
  IrModule ir;
  define_call(*ir.module, "call_expf", "expf", llvm::Type::getFloatTy(*ir.context));
  auto code = add(std::move(ir));
  auto* f = reinterpret_cast<float (*)(float)>(code->lookup("call_expf"));
  EXPECT_FLOAT_EQ(f(1.5f), std::exp(1.5f));
}

TEST(OrcJitTest, CallsLibmErfForDoubles) {
  IrModule ir;
  define_call(*ir.module, "call_erf", "erf", llvm::Type::getDoubleTy(*ir.context));
  auto code = add(std::move(ir));
  auto* f = reinterpret_cast<double (*)(double)>(code->lookup("call_erf"));
  EXPECT_DOUBLE_EQ(f(0.25), std::erf(0.25));
}

TEST(OrcJitTest, AddLookupAndDestroyWorkFromSeveralThreads) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 8; ++i) {
        try {
          IrModule ir;
          define_constant(*ir.module, "value", 100 * t + i);
          auto code = add(std::move(ir));
          if (reinterpret_cast<int (*)()>(code->lookup("value"))() != 100 * t + i) ++wrong;
        } catch (const Error&) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A module defining `answer` returning `value`; a value no other run used makes its key new even
// to a cache directory that outlives the test.
IrModule answer_module(int value) {
  IrModule ir;
  define_constant(*ir.module, "answer", value);
  return ir;
}

int fresh_value() {
  return static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() & 0x3fffffff);
}

int call_answer(const JitModule& module) {
  return reinterpret_cast<int (*)()>(module.lookup("answer"))();
}

TEST(OrcJitTest, ASecondCompileOfAModuleLoadsItsObjectFromTheDiskCache) {
  DiskCache& cache = DiskCache::instance();
  if (!cache.enabled()) GTEST_SKIP() << "the disk cache is off here: " << cache.why_disabled();
  const int value = fresh_value();
  const DiskCache::Counts before = cache.counts();
  auto first = add(answer_module(value));
  EXPECT_EQ(cache.counts().misses, before.misses + 1);
  EXPECT_EQ(cache.counts().writes, before.writes + 1);
  auto second = add(answer_module(value));
  EXPECT_EQ(cache.counts().hits, before.hits + 1);
  EXPECT_EQ(call_answer(*first), value);
  EXPECT_EQ(call_answer(*second), value);
}

TEST(OrcJitTest, ACorruptDiskCacheEntryIsCompiledAgain) {
  DiskCache& cache = DiskCache::instance();
  if (!cache.enabled()) GTEST_SKIP() << "the disk cache is off here: " << cache.why_disabled();
  const int value = fresh_value() ^ 0x5a5a;
  IrModule probe = answer_module(value);
  const std::string path = cache.dir() + "/objects/" + object_key(*probe.module) + ".o";
  add(answer_module(value));
  std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), 64u);
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const DiskCache::Counts before = cache.counts();
  auto again = add(answer_module(value));
  EXPECT_EQ(cache.counts().rejected, before.rejected + 1);
  EXPECT_EQ(call_answer(*again), value);
  EXPECT_EQ(cache.counts().writes, before.writes + 1);  // and stored whole again
}

TEST(OrcJitTest, ObjectKeysChangeWithTheCodeTheHostAndTheBuild) {
  const HostTarget& host = host_target();
  const std::string key = object_key(*answer_module(1).module);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(object_key(*answer_module(1).module), key);  // deterministic
  EXPECT_EQ(object_key(*answer_module(1).module, host, build_id()), key);
  EXPECT_NE(object_key(*answer_module(2).module), key);  // another constant
  // The same CPU without one of its features (AVX2 where it has it).
  HostTarget other = host;
  size_t on = other.features.find("+avx2");
  if (on == std::string::npos) on = other.features.find('+');
  ASSERT_NE(on, std::string::npos) << other.features;
  other.features[on] = '-';
  EXPECT_NE(object_key(*answer_module(1).module, other, build_id()), key);
  other = host;
  other.cpu = host.cpu == "znver3" ? "sapphirerapids" : "znver3";  // another CPU
  EXPECT_NE(object_key(*answer_module(1).module, other, build_id()), key);
  EXPECT_NE(object_key(*answer_module(1).module, host, build_id() + "-rebuilt"), key);
  EXPECT_FALSE(build_id().empty());
}

TEST(OrcJitTest, DumpedModulesBypassTheDiskCache) {
  DiskCache& cache = DiskCache::instance();
  const DiskCache::Counts before = cache.counts();
  const std::filesystem::path dir = dump_dir();
  auto dumped = add(answer_module(7), (dir / "answer").string());
  EXPECT_EQ(call_answer(*dumped), 7);
  EXPECT_EQ(cache.counts().hits, before.hits);
  EXPECT_EQ(cache.counts().writes, before.writes);
}

TEST(OrcJitTest, ACodeBundleRecordsWhatIsCompiledAndSuppliesItLater) {
  const int value = fresh_value() ^ 0x3c3c;
  CodeBundle bundle(1);
  const OrcJit::Counts before = OrcJit::counts();
  {
    UseCodeBundle use(&bundle);
    EXPECT_EQ(call_answer(*add(answer_module(value))), value);
  }
  // Recorded from the compile, or from the disk cache where an earlier run stored it.
  ASSERT_EQ(bundle.size(), 1u);
  EXPECT_NE(bundle.find(object_key(*answer_module(value).module)), nullptr);

  // The same module again under the bundle: linked from it, not compiled.
  const OrcJit::Counts middle = OrcJit::counts();
  EXPECT_EQ(middle.compiled + middle.loaded, before.compiled + before.loaded + 1);
  {
    UseCodeBundle use(&bundle);
    EXPECT_EQ(call_answer(*add(answer_module(value))), value);
  }
  EXPECT_EQ(OrcJit::counts().compiled, middle.compiled);
  EXPECT_EQ(OrcJit::counts().loaded, middle.loaded + 1);
  EXPECT_EQ(code_bundle_in_use(), nullptr);  // the scope put back what was in use
}

TEST(OrcJitTest, ABundleEntryThatDoesNotLinkIsCompiledInstead) {
  const int value = fresh_value() ^ 0x1234;
  CodeBundle bundle(1);
  bundle.add(object_key(*answer_module(value).module), "not an object file");
  UseCodeBundle use(&bundle);
  EXPECT_EQ(call_answer(*add(answer_module(value))), value);
}

}  // namespace
}  // namespace kiln::jit
