#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include "backend/codegen/llvm/math.h"

namespace kiln::codegen {
namespace {

using Emit = llvm::Value* (*)(llvm::IRBuilderBase&, llvm::Value*);
using Kernel = void (*)(const float*, float*, int64_t);

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();
const float kDenormMax = std::bit_cast<float>(0x007fffffu);

double sigmoid_reference(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// What the tests know about one function: how to emit it, the reference, the bound the header
// states, value ranges to sweep finely, points around which every neighbouring float is tried
// (thresholds between code paths, overflow and underflow edges), and exact special values.
struct MathFunction {
  const char* name;
  Emit emit;
  double (*reference)(double);
  double max_ulp;
  std::vector<std::pair<double, double>> ranges;
  std::vector<float> edges;
  std::vector<std::pair<float, float>> specials;
  bool avx512 = false;  // emitted with MathTarget::avx512 (needs AVX-512F/VL and FMA to run)
};

bool host_has_avx512() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  return features.lookup("avx512f") && features.lookup("avx512vl");
}

const std::vector<MathFunction>& functions() {
  static const std::vector<MathFunction> all = {
      {"Exp",
       [](llvm::IRBuilderBase& b, llvm::Value* x) { return emit_exp(b, x); },
       [](double x) { return std::exp(x); },
       kMaxUlpExp,
       {{-104, 89}, {-1, 1}},
       {0.0f, 88.72283f, -87.33655f, -103.27893f, 0.3465736f, -0.3465736f},
       {{-kInf, 0.0f},
        {kInf, kInf},
        {kNan, kNan},
        {0.0f, 1.0f},
        {-0.0f, 1.0f},
        {100.0f, kInf},
        {88.7229f, kInf},
        {-110.0f, 0.0f},
        {-FLT_MAX, 0.0f},
        {FLT_MAX, kInf}}},
      {"Log",
       emit_log,
       [](double x) { return std::log(x); },
       kMaxUlpLog,
       {{0, 4}, {0.5, 2}, {0.9, 1.1}},
       {1.0f, 0.70710677f, 1.4142135f, FLT_MIN, 2.0f},
       {{0.0f, -kInf},
        {-0.0f, -kInf},
        {-1.0f, kNan},
        {-kDenormMin, kNan},
        {-kInf, kNan},
        {kInf, kInf},
        {kNan, kNan},
        {1.0f, 0.0f}}},
      {"Tanh",
       [](llvm::IRBuilderBase& b, llvm::Value* x) { return emit_tanh(b, x); },
       [](double x) { return std::tanh(x); },
       kMaxUlpTanh,
       {{-10, 10}, {-1, 1}},
       {0.0f, 0.55f, -0.55f, 9.01f},
       {{kInf, 1.0f},
        {-kInf, -1.0f},
        {0.0f, 0.0f},
        {-0.0f, -0.0f},
        {kNan, kNan},
        {20.0f, 1.0f},
        {-20.0f, -1.0f},
        {kDenormMin, kDenormMin},
        {-kDenormMin, -kDenormMin}}},
      {"Erf",
       [](llvm::IRBuilderBase& b, llvm::Value* x) { return emit_erf(b, x); },
       [](double x) { return std::erf(x); },
       kMaxUlpErf,
       {{-5, 5}, {-1.5, 1.5}},
       {0.0f, 1.0f, -1.0f, 3.92f, 4.0f},
       {{kInf, 1.0f},
        {-kInf, -1.0f},
        {0.0f, 0.0f},
        {-0.0f, -0.0f},
        {kNan, kNan},
        {5.0f, 1.0f},
        {-5.0f, -1.0f}}},
      {"Sigmoid",
       [](llvm::IRBuilderBase& b, llvm::Value* x) { return emit_sigmoid(b, x); },
       sigmoid_reference,
       kMaxUlpSigmoid,
       {{-110, 30}, {-10, 10}},
       {0.0f, -87.33655f, -103.27893f, 16.63553f},
       {{-kInf, 0.0f},
        {kInf, 1.0f},
        {kNan, kNan},
        {0.0f, 0.5f},
        {-0.0f, 0.5f},
        {100.0f, 1.0f},
        {-110.0f, 0.0f}}},
      // exp for arguments known to be <= 0 (softmax, sigmoid, erf), over every float as -|x|.
      {"ExpNonPositive",
       [](llvm::IRBuilderBase& b, llvm::Value* x) {
         llvm::Value* minus_abs = b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
         return emit_exp(b, minus_abs, MathTarget{}, ExpArgument::kNonPositive);
       },
       [](double x) { return std::exp(-std::fabs(x)); },
       kMaxUlpExp,
       {{-104, 0}, {-1, 1}},
       {0.0f, -87.33655f, -103.27893f, -0.3465736f, -86.64f},
       {{-kInf, 0.0f},
        {kInf, 0.0f},
        {kNan, kNan},
        {0.0f, 1.0f},
        {-0.0f, 1.0f},
        {-110.0f, 0.0f},
        {-FLT_MAX, 0.0f},
        {-103.97f, kDenormMin}}},
  };
  // The functions built on exp once more, with vscalefps: the same bounds and special values.
  static const std::vector<MathFunction> with_avx512 = [] {
    std::vector<MathFunction> fns = all;
    for (MathFunction& fn : fns)
      fn.avx512 = true;
    fns[0].name = "ExpAvx512";
    fns[0].emit = [](llvm::IRBuilderBase& b, llvm::Value* x) {
      return emit_exp(b, x, MathTarget{true});
    };
    fns[2].name = "TanhAvx512";
    fns[2].emit = [](llvm::IRBuilderBase& b, llvm::Value* x) {
      return emit_tanh(b, x, MathTarget{true});
    };
    fns[3].name = "ErfAvx512";
    fns[3].emit = [](llvm::IRBuilderBase& b, llvm::Value* x) {
      return emit_erf(b, x, MathTarget{true});
    };
    fns[4].name = "SigmoidAvx512";
    fns[4].emit = [](llvm::IRBuilderBase& b, llvm::Value* x) {
      return emit_sigmoid(b, x, MathTarget{true});
    };
    fns[5].name = "ExpNonPositiveAvx512";
    fns[5].emit = [](llvm::IRBuilderBase& b, llvm::Value* x) {
      llvm::Value* minus_abs = b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
      return emit_exp(b, minus_abs, MathTarget{true}, ExpArgument::kNonPositive);
    };
    fns.erase(fns.begin() + 1);  // log does not use exp
    std::vector<MathFunction> both = all;
    both.insert(both.end(), fns.begin(), fns.end());
    return both;
  }();
  return with_avx512;
}

template <class T>
T check(llvm::Expected<T> value) {
  if (!value) throw std::runtime_error(llvm::toString(value.takeError()));
  return std::move(*value);
}

void check(llvm::Error error) {
  if (error) throw std::runtime_error(llvm::toString(std::move(error)));
}

// `void f(const float* in, float* out, int64 n)`: out[i] = emit(in[i]), eight lanes at a time with
// explicit <8 x float> loads and stores, then one at a time for the rest, so calls with n < 8 run
// only the scalar form. When `scalar_only`, the whole loop is the plain scalar loop.
std::unique_ptr<llvm::Module> build_kernel(llvm::LLVMContext& ctx, Emit emit, bool scalar_only) {
  auto module = std::make_unique<llvm::Module>("math_test", ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = b.getPtrTy();
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64}, false),
                                    llvm::Function::ExternalLinkage, "f", *module);
  llvm::Value* in = fn->getArg(0);
  llvm::Value* out = fn->getArg(1);
  llvm::Value* n = fn->getArg(2);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* vhead = llvm::BasicBlock::Create(ctx, "vhead", fn);
  auto* vbody = llvm::BasicBlock::Create(ctx, "vbody", fn);
  auto* shead = llvm::BasicBlock::Create(ctx, "shead", fn);
  auto* sbody = llvm::BasicBlock::Create(ctx, "sbody", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn);

  b.SetInsertPoint(entry);
  llvm::Value* n_vec = scalar_only ? b.getInt64(0) : b.CreateAnd(n, b.getInt64(-8));
  b.CreateBr(vhead);

  b.SetInsertPoint(vhead);
  llvm::PHINode* i = b.CreatePHI(i64, 2);
  i->addIncoming(b.getInt64(0), entry);
  b.CreateCondBr(b.CreateICmpULT(i, n_vec), vbody, shead);

  b.SetInsertPoint(vbody);
  auto* vec = llvm::FixedVectorType::get(f32, 8);
  llvm::Value* x = b.CreateAlignedLoad(vec, b.CreateGEP(f32, in, i), llvm::Align(4));
  b.CreateAlignedStore(emit(b, x), b.CreateGEP(f32, out, i), llvm::Align(4));
  i->addIncoming(b.CreateAdd(i, b.getInt64(8)), vbody);
  b.CreateBr(vhead);

  b.SetInsertPoint(shead);
  llvm::PHINode* j = b.CreatePHI(i64, 2);
  j->addIncoming(i, vhead);
  b.CreateCondBr(b.CreateICmpULT(j, n), sbody, exit);

  b.SetInsertPoint(sbody);
  llvm::Value* s = b.CreateAlignedLoad(f32, b.CreateGEP(f32, in, j), llvm::Align(4));
  b.CreateAlignedStore(emit(b, s), b.CreateGEP(f32, out, j), llvm::Align(4));
  j->addIncoming(b.CreateAdd(j, b.getInt64(1)), sbody);
  auto* latch = b.CreateBr(shead);
  if (!scalar_only) {
    // Keeps the scalar tail scalar, so that calls with n < 8 measure the scalar form.
    llvm::Metadata* off[] = {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                             llvm::ConstantAsMetadata::get(b.getFalse())};
    auto* loop_id = llvm::MDNode::getDistinct(ctx, {nullptr, llvm::MDNode::get(ctx, off)});
    loop_id->replaceOperandWith(0, loop_id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
  }

  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  std::string message;
  llvm::raw_string_ostream os(message);
  if (llvm::verifyModule(*module, &os)) throw std::runtime_error("invalid module: " + message);
  return module;
}

llvm::orc::JITTargetMachineBuilder host_machine(bool fma) {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost());
  // Clearing fma also clears the features that imply it (AVX-512), so this is an AVX2 machine
  // without fused multiply-add: fmuladd then becomes a multiply and an add.
  if (!fma) jtmb.addFeatures({"-fma", "-fma4"});
  return jtmb;
}

// The default O2 pipeline for the host, as the code generator will run it.
void optimize(llvm::Module& module, llvm::TargetMachine& tm) {
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple().str());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

// A kernel compiled for the host. Process symbols are not linked in (which needs the inactive
// platform: kernels have no static initializers), so a call that the backend turned into a
// library call (fmaf, rintf, ...) fails the lookup instead of passing silently.
class Jitted {
 public:
  Jitted(Emit emit, bool fma) {
    auto jtmb = host_machine(fma);
    auto tm = check(jtmb.createTargetMachine());
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto module = build_kernel(*ctx, emit, /*scalar_only=*/false);
    optimize(*module, *tm);
    jit_ = check(llvm::orc::LLJITBuilder()
                     .setJITTargetMachineBuilder(std::move(jtmb))
                     .setLinkProcessSymbolsByDefault(false)
                     .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                     .create());
    check(jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))));
    kernel_ = check(jit_->lookup("f")).toPtr<Kernel>();
  }

  // Through the <8 x float> form (all but the last n % 8 elements).
  std::vector<float> run_vector(const std::vector<float>& in) const {
    std::vector<float> out(in.size());
    kernel_(in.data(), out.data(), static_cast<int64_t>(in.size()));
    return out;
  }

  // n elements from `in` to `out` through the <8 x float> form (no allocation).
  void run_into(const float* in, float* out, int64_t n) const { kernel_(in, out, n); }

  // Through the scalar form only: every call has fewer than eight elements.
  std::vector<float> run_scalar(const std::vector<float>& in) const {
    std::vector<float> out(in.size());
    for (size_t i = 0; i < in.size(); i += 7) {
      kernel_(in.data() + i, out.data() + i,
              static_cast<int64_t>(std::min<size_t>(7, in.size() - i)));
    }
    return out;
  }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  Kernel kernel_ = nullptr;
};

// Position of a float on the number line in ulp steps: adjacent floats differ by one, +0 and -0
// coincide, and the steps continue evenly through the denormals and across zero.
int64_t ordered(float v) {
  int32_t bits = std::bit_cast<int32_t>(v);
  return bits >= 0 ? bits : -static_cast<int64_t>(bits & 0x7fffffff);
}

float from_ordered(int64_t position) {
  uint32_t bits = position >= 0 ? static_cast<uint32_t>(position)
                                : 0x80000000u | static_cast<uint32_t>(-position);
  return std::bit_cast<float>(bits);
}

double ulp_distance(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) {
    return std::isnan(got) && std::isnan(want) ? 0 : std::numeric_limits<double>::infinity();
  }
  return static_cast<double>(std::llabs(ordered(got) - ordered(want)));
}

// The inputs of the accuracy test and the reference results for them.
struct Sweep {
  std::vector<float> inputs;
  std::vector<float> expected;
};

const Sweep& sweep(size_t fn_index) {
  static std::vector<std::unique_ptr<Sweep>> cache(functions().size());
  auto& entry = cache[fn_index];
  if (entry) return *entry;
  const MathFunction& fn = functions()[fn_index];
  entry = std::make_unique<Sweep>();
  std::vector<float>& in = entry->inputs;
  // Every 1021st bit pattern: all exponents, both signs, NaNs, infinities and denormals; 1021 is
  // prime, so the low mantissa bits vary too.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 1021) {
    in.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  constexpr int kSteps = 1 << 20;
  for (auto [lo, hi] : fn.ranges) {
    for (int k = 0; k <= kSteps; ++k)
      in.push_back(static_cast<float>(lo + (hi - lo) * k / kSteps));
  }
  for (float edge : fn.edges) {
    for (int k = -(1 << 14); k <= (1 << 14); ++k) {
      in.push_back(from_ordered(ordered(edge) + k));
    }
  }
  for (float v : {0.0f, kInf, kNan, kDenormMin, kDenormMax, FLT_MIN, FLT_MAX}) {
    in.push_back(v);
    in.push_back(-v);
  }
  entry->expected.reserve(in.size());
  for (float v : in)
    entry->expected.push_back(static_cast<float>(fn.reference(v)));
  return *entry;
}

struct Worst {
  double ulp = 0;
  float input = 0, got = 0, want = 0;
};

Worst worst_error(const Sweep& s, const std::vector<float>& got) {
  Worst worst;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = ulp_distance(got[i], s.expected[i]);
    if (d > worst.ulp) worst = {d, s.inputs[i], got[i], s.expected[i]};
  }
  return worst;
}

std::string describe(float v) {
  std::ostringstream os;
  os.precision(9);
  os << v << " (0x" << std::hex << std::bit_cast<uint32_t>(v) << ")";
  return os.str();
}

// --- Accuracy: every function, vector and scalar form, with and without fused multiply-add.

struct AccuracyCase {
  size_t fn;
  bool vector;
  bool fma;
};

class MathAccuracyTest : public testing::TestWithParam<AccuracyCase> {};

TEST_P(MathAccuracyTest, StaysWithinStatedUlpBoundOfCLibrary) {
  const AccuracyCase& c = GetParam();
  const MathFunction& fn = functions()[c.fn];
  if (fn.avx512 && !host_has_avx512()) GTEST_SKIP() << "no AVX-512F/VL on this host";
  const Sweep& s = sweep(c.fn);
  Jitted jitted(fn.emit, c.fma);
  Worst worst =
      worst_error(s, c.vector ? jitted.run_vector(s.inputs) : jitted.run_scalar(s.inputs));
  RecordProperty("max_ulp", std::to_string(worst.ulp));
  RecordProperty("inputs", std::to_string(s.inputs.size()));
  EXPECT_LE(worst.ulp, fn.max_ulp)
      << fn.name << "(" << describe(worst.input) << ") = " << describe(worst.got) << ", expected "
      << describe(worst.want);
}

std::vector<AccuracyCase> accuracy_cases() {
  std::vector<AccuracyCase> cases;
  for (size_t fn = 0; fn < functions().size(); ++fn) {
    for (bool vector : {true, false}) {
      for (bool fma : {true, false}) {
        if (!fma && functions()[fn].avx512) continue;  // no FMA means no AVX-512 either
        cases.push_back({fn, vector, fma});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, MathAccuracyTest, testing::ValuesIn(accuracy_cases()),
                         [](const testing::TestParamInfo<AccuracyCase>& info) {
                           return std::string(functions()[info.param.fn].name) +
                                  (info.param.vector ? "Vector" : "Scalar") +
                                  (info.param.fma ? "Fma" : "NoFma");
                         });

// --- Special values: exact results (sign of zero included), both forms.

struct FormCase {
  size_t fn;
  bool vector;
};

class MathSpecialValuesTest : public testing::TestWithParam<FormCase> {};

TEST_P(MathSpecialValuesTest, MatchCLibraryExactly) {
  const MathFunction& fn = functions()[GetParam().fn];
  if (fn.avx512 && !host_has_avx512()) GTEST_SKIP() << "no AVX-512F/VL on this host";
  std::vector<float> in;
  for (auto [x, y] : fn.specials)
    in.push_back(x);
  Jitted jitted(fn.emit, /*fma=*/true);
  // Repeated so that the vector form sees every value in a full <8 x float> chunk.
  std::vector<float> padded;
  for (int r = 0; r < 8; ++r)
    padded.insert(padded.end(), in.begin(), in.end());
  std::vector<float> out =
      GetParam().vector ? jitted.run_vector(padded) : jitted.run_scalar(padded);
  for (size_t i = 0; i < padded.size(); ++i) {
    float want = fn.specials[i % in.size()].second;
    bool same = std::isnan(want) ? std::isnan(out[i])
                                 : std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(want);
    EXPECT_TRUE(same) << fn.name << "(" << describe(padded[i]) << ") = " << describe(out[i])
                      << ", expected " << describe(want);
  }
}

std::vector<FormCase> form_cases() {
  std::vector<FormCase> cases;
  for (size_t fn = 0; fn < functions().size(); ++fn) {
    for (bool vector : {true, false})
      cases.push_back({fn, vector});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, MathSpecialValuesTest, testing::ValuesIn(form_cases()),
                         [](const testing::TestParamInfo<FormCase>& info) {
                           return std::string(functions()[info.param.fn].name) +
                                  (info.param.vector ? "Vector" : "Scalar");
                         });

// --- Shape of the emitted code.

class MathCodeShapeTest : public testing::TestWithParam<size_t> {};

TEST_P(MathCodeShapeTest, IsOneBlockWithoutCalls) {
  for (unsigned lanes : {1u, 8u}) {
    llvm::LLVMContext ctx;
    llvm::Module module("shape", ctx);
    llvm::IRBuilder<> b(ctx);
    llvm::Type* ty =
        lanes == 1 ? b.getFloatTy()
                   : static_cast<llvm::Type*>(llvm::FixedVectorType::get(b.getFloatTy(), lanes));
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(ty, {ty}, false),
                                      llvm::Function::ExternalLinkage, "g", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    llvm::Value* result = functions()[GetParam()].emit(b, fn->getArg(0));
    ASSERT_EQ(result->getType(), ty);
    b.CreateRet(result);
    EXPECT_FALSE(llvm::verifyFunction(*fn, &llvm::errs()));
    EXPECT_EQ(fn->size(), 1u);
    for (llvm::Instruction& inst : llvm::instructions(*fn)) {
      if (auto* call = llvm::dyn_cast<llvm::CallBase>(&inst)) {
        EXPECT_TRUE(llvm::isa<llvm::IntrinsicInst>(call))
            << "call to " << call->getCalledOperand()->getName().str();
      }
    }
  }
}

TEST_P(MathCodeShapeTest, ScalarLoopIsVectorizedAtO2) {
  if (functions()[GetParam()].avx512 && !host_has_avx512()) GTEST_SKIP() << "no AVX-512F/VL";
  auto jtmb = host_machine(/*fma=*/true);
  auto tm = check(jtmb.createTargetMachine());
  llvm::LLVMContext ctx;
  auto module = build_kernel(ctx, functions()[GetParam()].emit, /*scalar_only=*/true);
  optimize(*module, *tm);
  bool vector_math = false;
  for (llvm::Instruction& inst : llvm::instructions(*module->getFunction("f"))) {
    if (llvm::isa<llvm::BinaryOperator>(inst) && inst.getType()->isVectorTy()) vector_math = true;
  }
  EXPECT_TRUE(vector_math) << "no vector arithmetic in the loop after O2";
}

INSTANTIATE_TEST_SUITE_P(All, MathCodeShapeTest, testing::Range<size_t>(0, functions().size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return std::string(functions()[info.param].name);
                         });

// --- exp with vscalefps is exp without it, bit for bit.

TEST(MathAvx512Test, ExpScalesWithOneScalefPerVector) {
  for (unsigned lanes : {4u, 8u, 16u, 64u}) {
    llvm::LLVMContext ctx;
    llvm::Module module("scalef", ctx);
    llvm::IRBuilder<> b(ctx);
    auto* ty = llvm::FixedVectorType::get(b.getFloatTy(), lanes);
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(ty, {ty}, false),
                                      llvm::Function::ExternalLinkage, "g", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    b.CreateRet(emit_exp(b, fn->getArg(0), MathTarget{true}));
    EXPECT_FALSE(llvm::verifyFunction(*fn, &llvm::errs()));
    int scalefs = 0, integer_ops = 0;
    for (llvm::Instruction& inst : llvm::instructions(*fn)) {
      if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst))
        scalefs += call->getCalledFunction()->getName().contains("scalef");
      integer_ops += inst.getOpcode() == llvm::Instruction::Shl;
    }
    EXPECT_EQ(scalefs, lanes == 64 ? 4 : 1) << lanes << " lanes";
    EXPECT_EQ(integer_ops, 0) << "no powers of two built in integer lanes";
  }
}

// Inputs in [begin, end) (as float bits) where `a` and `b` differ (NaNs count as equal), and the
// first of them.
std::pair<uint64_t, uint32_t> differences(const Jitted& a, const Jitted& b, uint64_t begin,
                                          uint64_t end) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::vector<float> in(kChunk), ra(kChunk), rb(kChunk);
  uint64_t differ = 0;
  uint32_t first = 0;
  for (uint64_t start = begin; start < end; start += kChunk) {
    const uint64_t n = std::min(kChunk, end - start);
    for (uint64_t i = 0; i < n; ++i)
      in[i] = std::bit_cast<float>(static_cast<uint32_t>(start + i));
    a.run_into(in.data(), ra.data(), n);
    b.run_into(in.data(), rb.data(), n);
    for (uint64_t i = 0; i < n; ++i) {
      const bool same = std::isnan(ra[i])
                            ? std::isnan(rb[i])
                            : std::bit_cast<uint32_t>(ra[i]) == std::bit_cast<uint32_t>(rb[i]);
      if (!same && differ++ == 0) first = static_cast<uint32_t>(start + i);
    }
  }
  return {differ, first};
}

TEST(MathAvx512Test, ExpWithScalefMatchesTheGenericFormOnEveryFloat) {
  if (!host_has_avx512()) GTEST_SKIP() << "no AVX-512F/VL on this host";
  const Jitted generic(functions()[0].emit, /*fma=*/true);
  const Jitted scalef(
      [](llvm::IRBuilderBase& b, llvm::Value* x) { return emit_exp(b, x, MathTarget{true}); },
      /*fma=*/true);
  const auto [differ, first] = differences(generic, scalef, 0, uint64_t{1} << 32);
  EXPECT_EQ(differ, 0u) << "first at " << describe(std::bit_cast<float>(first));
}

// --- exp of an argument known to be <= 0 (no overflow clamp) is exp, bit for bit.

template <bool kAvx512, ExpArgument kArgument>
llvm::Value* exp_for(llvm::IRBuilderBase& b, llvm::Value* x) {
  return emit_exp(b, x, MathTarget{kAvx512}, kArgument);
}

// Positive NaNs, then every float with the sign bit set: -0, the negatives, -inf and -NaN.
void expect_same_on_non_positive_floats(const Jitted& full, const Jitted& nonpositive) {
  for (auto [begin, end] : {std::pair<uint64_t, uint64_t>{0x7f800001u, 0x80000000u},
                            std::pair<uint64_t, uint64_t>{0x80000000u, uint64_t{1} << 32}}) {
    const auto [differ, first] = differences(full, nonpositive, begin, end);
    EXPECT_EQ(differ, 0u) << "first at " << describe(std::bit_cast<float>(first));
  }
}

TEST(MathTest, ExpOfANonPositiveArgumentIsExpOnEveryNonPositiveFloatAndNaN) {
  expect_same_on_non_positive_floats(Jitted(exp_for<false, ExpArgument::kAny>, /*fma=*/true),
                                     Jitted(exp_for<false, ExpArgument::kNonPositive>, true));
}

TEST(MathAvx512Test, ExpOfANonPositiveArgumentIsExpOnEveryNonPositiveFloatAndNaN) {
  if (!host_has_avx512()) GTEST_SKIP() << "no AVX-512F/VL on this host";
  expect_same_on_non_positive_floats(Jitted(exp_for<true, ExpArgument::kAny>, /*fma=*/true),
                                     Jitted(exp_for<true, ExpArgument::kNonPositive>, true));
}

}  // namespace
}  // namespace kiln::codegen
