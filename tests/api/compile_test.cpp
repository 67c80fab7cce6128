// kiln::compile on the test models: the same results as LibTorch, guards, bad inputs, and the
// unwrap/recompile contract.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "kiln/kiln.h"
#include "support/test_models.h"

namespace kiln {
namespace {

using testing::compare;
using testing::load_model;

c10::IValue reference(torch::jit::Module& module, const std::vector<c10::IValue>& inputs) {
  torch::NoGradGuard no_grad;
  return module.forward(inputs);
}

c10::IValue run(const CompiledModule& compiled, const std::vector<c10::IValue>& inputs) {
  torch::NoGradGuard no_grad;
  return compiled.forward(inputs);
}

TEST(Compile, ScriptedMlpMatchesLibTorch) {
  auto module = load_model("mlp");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({8, 64})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
}

TEST(Compile, StaticModelRunsWithoutTheInterpreter) {
  auto module = load_model("mlp");
  auto explanation = compile(module).explain({torch::randn({8, 64})});
  EXPECT_EQ(explanation.interpreter, 0) << explanation.to_text();
  EXPECT_EQ(explanation.regions, 1);
  // Three linears through ATen's dispatcher (oneDNN, the gelu and relu inside where kiln has its
  // own oneDNN), the log_softmax in a generated kernel.
  EXPECT_EQ(explanation.extern_calls, 3) << explanation.to_text();
  EXPECT_GE(explanation.fused_kernels, 1) << explanation.to_text();
}

TEST(Compile, TracedCnnWithBatchNormMatchesLibTorch) {
  auto module = load_model("cnn_traced");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({2, 3, 32, 32})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs), 1e-4, 1e-4), "");
  auto explanation = compiled.explain(inputs);
  EXPECT_EQ(explanation.fallback_regions, 0) << explanation.to_text();
  // The traced convolutions (batch norms folded in) run on oneDNN with weights packed at compile
  // time (kiln's own primitives where built with them, else ATen's op), inside the compiled
  // region; nothing runs in the interpreter.
  EXPECT_EQ(explanation.interpreter, 0) << explanation.to_text();
  int onednn = 0;
  for (const auto& entry : explanation.entries)
    onednn += entry.op == "mkldnn::_convolution_pointwise" || entry.op == "kiln::onednn_conv2d";
  EXPECT_EQ(onednn, 2) << explanation.to_text();
  // The image into channels-last once; the packed weights are constants (not counted).
  EXPECT_EQ(explanation.layout_conversions, 1) << explanation.to_text();
  for (const auto& entry : explanation.entries)
    EXPECT_NE(entry.op, "aten::batch_norm") << "batch norms are folded into the convolutions";
}

TEST(Compile, TransformerEncoderLayerMatchesLibTorch) {
  auto module = load_model("transformer");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({2, 10, 32})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs), 1e-4, 1e-4), "");
  // The fast path's checks (input dim, devices, dtypes, requires_grad, grad mode, autocast) are
  // folded per signature: left in the interpreter are only the reads of the two attention
  // weights that require grad (and so cannot be TorchScript constants), 4 GetAttrs.
  torch::NoGradGuard no_grad;
  const Explanation explanation = compiled.explain(inputs);
  EXPECT_EQ(explanation.regions, 1) << explanation.to_text();
  EXPECT_LE(explanation.interpreter, 4) << explanation.to_text();
}

TEST(Compile, ControlFlowAndListsStayInTheInterpreter) {
  auto module = load_model("control_flow");
  auto compiled = compile(module);
  for (int64_t steps : {0, 1, 3, 4}) {
    std::vector<c10::IValue> inputs = {torch::randn({4, 16}), steps};
    if (steps == 0) {  // cat of an empty list fails in eager too; kiln must fail the same way
      EXPECT_THROW(run(compiled, inputs), Error);
      continue;
    }
    EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "") << "steps " << steps;
  }
  auto explanation = compiled.explain({torch::randn({4, 16}), int64_t{3}});
  EXPECT_GT(explanation.interpreter, 0) << explanation.to_text();
  EXPECT_GT(explanation.regions, 0) << explanation.to_text();
  EXPECT_GT(explanation.extern_calls + explanation.kernels, 0) << explanation.to_text();
}

TEST(Compile, TupleOutputsAndExternOpsMatch) {
  auto module = load_model("elementwise");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({16, 32}), torch::randn({16, 32})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  auto explanation = compiled.explain(inputs);
  bool erfinv_is_extern = false;
  for (const auto& e : explanation.entries) {
    if (e.op == "aten::erfinv") {
      erfinv_is_extern = e.where == RunsIn::ExternAten &&
                         e.why.find("not in kiln's op table") != std::string::npos;
    }
  }
  EXPECT_TRUE(erfinv_is_extern) << explanation.to_text();
  EXPECT_EQ(explanation.interpreter, 0) << explanation.to_text();
}

TEST(Compile, DataDependentOpStaysOutsideRegions) {
  auto module = load_model("data_dependent");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({8, 8})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  auto explanation = compiled.explain(inputs);
  EXPECT_EQ(explanation.fallback_regions, 0) << explanation.to_text();
  EXPECT_GT(explanation.fused_kernels, 0) << explanation.to_text();
  bool nonzero_interpreted = false;
  for (const auto& e : explanation.entries)
    nonzero_interpreted |= e.op == "aten::nonzero" && e.where == RunsIn::Interpreter;
  EXPECT_TRUE(nonzero_interpreted) << explanation.to_text();
}

// bincount has no meta kernel and its output size depends on the data: at compile time it runs
// once on zeros (size 1); at run time it returns another size, which the plan must notice.
torch::jit::Module bincount_module() {
  torch::jit::Module module("Counts");
  module.define(R"(
    def forward(self, x):
        return torch.bincount(x).float() * 2.0
  )");
  return module;
}

TEST(Compile, ShapeThatChangesAtRunTimeFallsBackToTheInterpreter) {
  auto module = bincount_module();
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::tensor({0, 3, 3, 1}, torch::kLong)};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  auto explanation = compiled.explain(inputs);
  EXPECT_EQ(explanation.fallback_regions, 1) << explanation.to_text();
}

TEST(Compile, StrictTurnsAFallbackIntoAnError) {
  auto compiled = compile(bincount_module(), CompileOptions::parse("strict=true"));
  EXPECT_THROW(run(compiled, {torch::tensor({0, 3, 3, 1}, torch::kLong)}), Error);
}

// The interpreter rethrows what a region raises as a plain runtime_error: the compiled module
// still raises kiln's error with its kind (here a region between interpreter nodes, the list).
TEST(Compile, StrictErrorsKeepTheirKindThroughTheInterpreter) {
  torch::jit::Module module("CountsInAList");
  module.define(R"(
    def forward(self, x):
        return [torch.bincount(x).float() * 2.0]
  )");
  auto compiled = compile(module, CompileOptions::parse("strict=true"));
  try {
    run(compiled, {torch::tensor({0, 3, 3, 1}, torch::kLong)});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_EQ(std::string(e.what()).find("failed on these inputs"), std::string::npos);
  }
}

TEST(Guards, NewShapeCompilesANewSpecialization) {
  auto module = load_model("mlp");
  auto compiled = compile(module);
  run(compiled, {torch::randn({8, 64})});
  run(compiled, {torch::randn({8, 64})});
  EXPECT_EQ(compiled.num_specializations(), 1);
  std::vector<c10::IValue> inputs = {torch::randn({3, 64})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  EXPECT_EQ(compiled.num_specializations(), 2);
}

TEST(Guards, PastTheLimitTheOriginalModuleRuns) {
  auto module = load_model("mlp");
  auto compiled = compile(module, CompileOptions::parse("max_specializations=1"));
  run(compiled, {torch::randn({8, 64})});
  std::vector<c10::IValue> inputs = {torch::randn({5, 64})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  EXPECT_EQ(compiled.num_specializations(), 1);
}

TEST(Guards, NonContiguousInputGetsItsOwnSpecialization) {
  auto module = load_model("mlp");
  auto compiled = compile(module);
  run(compiled, {torch::randn({8, 64})});
  std::vector<c10::IValue> inputs = {torch::randn({64, 8}).t()};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
  EXPECT_EQ(compiled.num_specializations(), 2);
}

TEST(Guards, ZeroSizeInputMatches) {
  auto module = load_model("mlp");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({0, 64})};
  EXPECT_EQ(compare(run(compiled, inputs), reference(module, inputs)), "");
}

TEST(Guards, ExampleInputsCompileAtCompileTime) {
  CompileOptions options;
  options.example_inputs = {torch::randn({8, 64})};
  auto compiled = compile(load_model("mlp"), options);
  EXPECT_EQ(compiled.num_specializations(), 1);
}

TEST(BadInput, WrongNumberOfInputsIsAnError) {
  auto compiled = compile(load_model("mlp"));
  try {
    run(compiled, {torch::randn({8, 64}), torch::randn({8, 64})});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(
        std::string(e.what()).find("wrong number of inputs: forward(x: Tensor) takes 1, got 2"),
        std::string::npos)
        << e.what();
  }
}

TEST(BadInput, NonTensorForATensorArgumentIsAnError) {
  auto compiled = compile(load_model("mlp"));
  try {
    run(compiled, {int64_t{3}});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 ('x') must be Tensor, got int"),
              std::string::npos)
        << e.what();
  }
}

TEST(BadInput, WrongDtypeIsAClearError) {
  auto module = load_model("mlp");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({8, 64}, torch::kFloat64)};
  EXPECT_ANY_THROW(reference(module, inputs));  // eager rejects it too
  try {
    run(compiled, inputs);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model failed on these inputs"), std::string::npos)
        << e.what();
  }
}

TEST(BadInput, WrongRankIsAClearError) {
  auto compiled = compile(load_model("cnn_traced"));
  EXPECT_THROW(run(compiled, {torch::randn({3, 32, 32, 2, 2})}), Error);
}

TEST(BadInput, WrongDeviceForTargetCpuIsAnError) {
  auto compiled = compile(load_model("mlp"), CompileOptions::parse("target=cpu"));
  try {
    run(compiled, {torch::empty({8, 64}, torch::Device(torch::kMeta))});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "is on device meta, but the module was compiled with target=cpu"),
              std::string::npos)
        << e.what();
  }
}

TEST(BadInput, OtherDeviceWithTargetAutoRunsWhereEagerRuns) {
  torch::jit::Module module("Scale");
  module.define("def forward(self, x):\n  return torch.exp(x) * 2.0 + x\n");
  auto compiled = compile(module);
  auto meta = torch::empty({16, 32}, torch::Device(torch::kMeta));
  auto expected = reference(module, {meta}).toTensor();
  auto actual = run(compiled, {meta}).toTensor();
  EXPECT_TRUE(actual.is_meta());
  EXPECT_EQ(actual.sizes(), expected.sizes());
}

TEST(BadInput, OtherDeviceWhereEagerFailsIsAClearError) {
  auto module = load_model("mlp");  // relu has no meta kernel: eager fails on meta tensors too
  auto compiled = compile(module);
  auto meta = torch::empty({8, 64}, torch::Device(torch::kMeta));
  EXPECT_ANY_THROW(reference(module, {meta}));
  EXPECT_THROW(run(compiled, {meta}), Error);
}

TEST(BadInput, TargetCudaWithoutCudaIsAnError) {
  try {
    compile(load_model("mlp"), CompileOptions::parse("target=cuda"));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target=cuda, but CUDA is not available"),
              std::string::npos);
  }
}

TEST(BadInput, ModuleWithoutForwardIsAnError) {
  torch::jit::Module empty("Empty");
  try {
    compile(empty);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("has no forward method"), std::string::npos);
  }
}

TEST(Unwrap, ReturnsTheOriginalModuleAndOptions) {
  auto module = load_model("mlp");
  auto compiled = compile(module, CompileOptions::parse("strict=true,max_specializations=3"));
  auto [original, options] = unwrap(compiled);
  EXPECT_EQ(original._ivalue(), module._ivalue());
  EXPECT_EQ(options.to_string(), compiled.options().to_string());
  auto again = compile(load_model("cnn_traced"), options);
  EXPECT_EQ(again.options().max_specializations, 3);
  EXPECT_TRUE(again.options().strict);
}

TEST(Unwrap, CompileLeavesTheModuleUntouched) {
  auto module = load_model("mlp");
  module.train();
  auto weight = module.attr("fc1").toModule().attr("weight").toTensor().clone();
  auto compiled = compile(module);
  run(compiled, {torch::randn({8, 64})});
  EXPECT_TRUE(module.is_training());
  EXPECT_TRUE(module.attr("fc1").toModule().attr("weight").toTensor().equal(weight));
  EXPECT_TRUE(module.find_method("forward").has_value());
}

// Functions of the module's CompilationUnit whose graphs hold tensor constants (a frozen
// module's weights).
size_t functions_holding_tensors(const torch::jit::Module& module) {
  size_t count = 0;
  for (torch::jit::Function* function : module._ivalue()->compilation_unit()->get_functions()) {
    auto* graph_function = function ? torch::jit::tryToGraphFunction(*function) : nullptr;
    if (!graph_function) continue;
    const auto nodes = graph_function->graph()->nodes();
    count += std::any_of(nodes.begin(), nodes.end(), [](const torch::jit::Node* node) {
      return node->kind() == c10::prim::Constant && node->output()->type()->cast<c10::TensorType>();
    });
  }
  return count;
}

// Freezing registers the frozen clone's methods, whose graphs hold the weights, in the module's
// CompilationUnit, which outlives the compiled module: they go when it does.
TEST(Unwrap, ADestroyedCompiledModuleReleasesItsFrozenWeights) {
  auto module = load_model("mlp");
  const size_t before = functions_holding_tensors(module);
  {
    auto compiled = compile(module);
    run(compiled, {torch::randn({8, 64})});
    EXPECT_GT(functions_holding_tensors(module), before);
  }
  EXPECT_EQ(functions_holding_tensors(module), before);
}

// The compiled module holds its own copy of the weights: a write to the caller's is not seen.
TEST(Unwrap, WritesToTheCallersWeightsDoNotReachTheCompiledModule) {
  auto module = load_model("mlp");
  std::vector<c10::IValue> inputs = {torch::randn({8, 64})};
  const c10::IValue expected = reference(module, inputs);
  auto compiled = compile(module);
  at::Tensor weight = module.attr("fc1").toModule().attr("weight").toTensor();
  {
    torch::NoGradGuard no_grad;
    weight.zero_();  // before the first call: the compile reads its copy only then
  }
  EXPECT_EQ(compare(run(compiled, inputs), expected), "");
}

TEST(Threads, ConcurrentCallsGiveTheSameResults) {
  auto module = load_model("cnn_traced");
  auto compiled = compile(module);
  std::vector<c10::IValue> inputs = {torch::randn({2, 3, 32, 32})};
  auto expected = reference(module, inputs);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (!compare(run(compiled, inputs), expected, 1e-4, 1e-4).empty()) ++mismatches;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(compiled.num_specializations(), 1);
}

TEST(Threads, NewSignaturesCompileWhileOtherThreadsRun) {
  // Eight threads, each with its own batch size, all starting at once: compiles of new
  // signatures race with runs of compiled ones. Results equal the single-threaded ones.
  auto module = load_model("cnn_traced");
  auto compiled = compile(module, CompileOptions::parse("max_specializations=8"));
  constexpr int kThreads = 8;
  std::vector<std::vector<c10::IValue>> inputs;
  std::vector<c10::IValue> expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back({torch::randn({1 + t, 3, 32, 32})});
    expected.push_back(reference(module, inputs.back()));
  }
  std::atomic<int> mismatches{0}, ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads)
        std::this_thread::yield();
      for (int i = 0; i < 3; ++i) {
        if (!compare(run(compiled, inputs[t]), expected[t], 1e-4, 1e-4).empty()) ++mismatches;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
  // Each batch compiles on its own or runs a shape class's specialization, whichever thread
  // came first: at most one compile per batch.
  EXPECT_GE(compiled.num_specializations(), 1);
  EXPECT_LE(compiled.num_specializations(), kThreads);
}

TEST(Explain, JsonHasTheCounts) {
  auto explanation = compile(load_model("mlp")).explain({torch::randn({8, 64})});
  const std::string json = explanation.to_json();
  for (const char* key : {"\"nodes\": ", "\"kernels\": ", "\"fused_kernels\": ", "\"extern\": 3",
                          "\"interpreter\": 0", "\"codegen_seconds\": ", "\"disk_cache_hits\": ",
                          "\"disk_cache_misses\": "}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  EXPECT_EQ(explanation.nodes,
            explanation.extern_calls + explanation.interpreter + explanation.kernels);
}

TEST(Dump, DumpDirReceivesTheGraphs) {
  auto dir = std::filesystem::temp_directory_path() / "kiln-dump-test";
  std::filesystem::remove_all(dir);
  auto compiled = compile(load_model("mlp"), CompileOptions::parse("dump_dir=" + dir.string()));
  run(compiled, {torch::randn({8, 64})});
  int kir = 0, torchscript = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    kir += entry.path().extension() == ".kir";
    torchscript += entry.path().extension() == ".torchscript";
  }
  EXPECT_GE(kir, 3);  // after capture and after each pass
  EXPECT_EQ(torchscript, 1);
  std::filesystem::remove_all(dir);
}

TEST(Dump, DumpDirReceivesKernelIrLlvmIrAndAssembly) {
  auto dir = std::filesystem::temp_directory_path() / "kiln-dump-kernels-test";
  std::filesystem::remove_all(dir);
  auto compiled = compile(load_model("mlp"), CompileOptions::parse("dump_dir=" + dir.string()));
  run(compiled, {torch::randn({8, 64})});
  std::map<std::string, std::string> text;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    text[entry.path().extension().string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text[".kernel"].find("kernel "), std::string::npos);                 // kernel IR
  EXPECT_NE(text[".ll"].find("define void @kiln_kernel_0"), std::string::npos);  // LLVM IR
  EXPECT_NE(text[".s"].find("kiln_kernel_0:"), std::string::npos);               // assembly
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
