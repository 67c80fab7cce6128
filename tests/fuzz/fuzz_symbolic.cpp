// Running a symbolic fuzz case: the case at several bindings, one shape class compiled from
// them, and the class's plans run against eager at bindings it never saw.
#include "fuzz/fuzz_symbolic.h"

#include <ATen/ATen.h>

#include <chrono>
#include <optional>
#include <random>

#include "backend/api/compile_class.h"
#include "fuzz/fuzz_case.h"
#include "fuzz/fuzz_support.h"
#include "kiln/error.h"
#include "kiln/options.h"
#include "passes/generalize_graph.h"
#include "passes/ir/parser.h"
#include "runtime/executor.h"

namespace kiln::fuzz {
namespace {

bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  if (is_float(a.scalar_type()))
    return ((a == b) | (at::isnan(a) & at::isnan(b))).all().item<bool>();
  return at::equal(a, b);
}

/// Whether the case at another binding is the program `program` instantiates there, with the
/// same constants: then the class must serve it. Where the data decided an op or a scalar it is
/// another program, which the class is not asked to run.
bool same_program(const GraphTemplate& program, const std::vector<at::Tensor>& constants,
                  const FuzzCase& c) {
  const auto expected = instantiate(program, c.binding);
  if (!structure_difference(*expected, *c.graph).empty()) return false;
  if (integers(*expected) != integers(*c.graph)) return false;
  if (c.constants.size() != constants.size()) return false;
  for (size_t i = 0; i < constants.size(); ++i) {
    if (!same_tensor(c.constants[i], constants[i])) return false;
  }
  return true;
}

/// Bindings the class was not compiled at: each size input from a set of awkward values (primes,
/// both sides of 4, 8, 16 and 32, the usual powers of two), drawn from the seed.
std::vector<std::vector<int64_t>> random_bindings(uint64_t seed, size_t size_inputs, int count) {
  static const std::vector<int64_t> kValues = {2,  3,  4,  5,  7,  8,  9,  11, 13,
                                               15, 16, 17, 23, 31, 32, 33, 64, 97};
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 77);
  std::uniform_int_distribution<size_t> pick(0, kValues.size() - 1);
  std::vector<std::vector<int64_t>> bindings(count);
  for (auto& binding : bindings) {
    for (size_t i = 0; i < size_inputs; ++i)
      binding.push_back(kValues[pick(rng)]);
  }
  return bindings;
}

std::string binding_string(const std::vector<int64_t>& binding) {
  std::string s;
  for (int64_t v : binding)
    s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

}  // namespace

SymbolicResult run_symbolic_seed(uint64_t seed, int random_count) {
  SymbolicResult result;
  result.seed = seed;
  const auto start = std::chrono::steady_clock::now();
  auto done = [&]() -> SymbolicResult {
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
  auto fail = [&](const FuzzCase& c, const std::string& what) {
    std::string dims;
    for (int d : c.size_dims)
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    result.report = reproducer(c, "symbolic (size inputs: main dims " + dims + ", at " +
                                      binding_string(c.binding) + "): " + what) +
                    "rerun: kiln_fuzz --symbolic --seeds " + std::to_string(seed) + " --verbose\n";
    return done();
  };

  // The case at the base binding, at each size input moved by one, and at the check binding.
  auto make = [&](std::span<const int64_t> binding) -> std::optional<FuzzCase> {
    try {
      return make_symbolic_case(seed, binding);
    } catch (const std::exception& e) {
      result.passed = false;
      result.report = "=== kiln fuzz seed " + std::to_string(seed) +
                      " (symbolic): the generator threw (a fuzzer bug): " + e.what() + "\n";
      return std::nullopt;
    }
  };
  std::vector<FuzzCase> cases;
  if (auto c = make({})) {
    cases.push_back(std::move(*c));
  } else {
    return done();
  }
  const std::vector<int64_t> base = cases[0].binding;
  result.size_inputs = static_cast<int>(base.size());
  result.passed = true;  // until a plan differs from eager, or the generator throws
  if (base.empty()) {
    result.not_formed = "no dim of its main shape is 2 or more";
    return done();
  }
  const auto [bindings, check] = class_bindings(base);
  for (size_t j = 1; j < bindings.size(); ++j) {
    auto c = make(bindings[j]);
    if (!c) return done();
    cases.push_back(std::move(*c));
  }
  auto made = make(check);
  if (!made) return done();
  FuzzCase checked = std::move(*made);

  // The program's own template: which bindings run the same program.
  std::vector<const ir::Graph*> graphs;
  for (const FuzzCase& c : cases)
    graphs.push_back(c.graph.get());
  std::string why;
  const auto program = generalize_graph(graphs, bindings, why);
  if (!program) {
    result.not_formed = "the program changes with its sizes: " + why;
    return done();
  }
  for (const FuzzCase& c : cases) {
    if (!same_program(*program, cases[0].constants, c)) {
      result.not_formed = "the program's constants change with its sizes";
      return done();
    }
  }
  if (!same_program(*program, cases[0].constants, checked)) {
    result.not_formed = "the program at the check binding is another";
    return done();
  }

  CompileOptions options;
  options.fusion = true;
  options.strict = true;  // a group that fails code generation is a failure, not a fallback
  std::vector<ImportedGraph> imports;
  for (const FuzzCase& c : cases)
    imports.push_back({ir::parse_graph(c.ir_text), c.constants, c10::Device(c10::kCPU)});
  std::shared_ptr<const CompiledClass> compiled;
  try {
    compiled =
        compile_class(std::move(imports), bindings,
                      {ir::parse_graph(checked.ir_text), checked.constants, c10::Device(c10::kCPU)},
                      check, options, "fuzz" + std::to_string(seed), /*plan_memory=*/true);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Unsupported) {
      result.passed = false;
      return fail(cases[0], std::string("compile_class threw: ") + e.what());
    }
    result.not_formed = e.what();
    return done();
  } catch (const std::exception& e) {
    result.passed = false;
    return fail(cases[0], std::string("compile_class threw: ") + e.what());
  }
  result.formed = true;
  result.generic_kernels = static_cast<int>(compiled->kernels.size());

  // The class's plan at the base, at the check binding, and at bindings it never saw.
  std::vector<FuzzCase> runs;
  runs.push_back(std::move(cases[0]));
  runs.push_back(std::move(checked));
  for (const auto& binding : random_bindings(seed, base.size(), random_count)) {
    auto made_there = make(binding);
    if (!made_there) return done();
    FuzzCase c = std::move(*made_there);
    if (!same_program(*program, runs[0].constants, c)) {
      ++result.bindings_skipped;
      continue;
    }
    runs.push_back(std::move(c));
  }
  for (FuzzCase& c : runs) {
    std::shared_ptr<CompiledRegion> region;
    try {
      region = instantiate_class(*compiled, c.binding);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Unsupported) {
        result.passed = false;
        return fail(c, std::string("instantiate_class threw: ") + e.what());
      }
      ++result.bindings_skipped;  // its memory plan writes in place elsewhere: compiled alone
      continue;
    }
    std::vector<at::Tensor> inputs, before;
    for (const auto& t : c.inputs) {
      inputs.push_back(t);
      before.push_back(t.clone());
    }
    std::vector<at::Tensor> outputs;
    try {
      outputs = run_plan(region->plan, inputs);
    } catch (const std::exception& e) {
      result.passed = false;
      return fail(c, std::string("the class's plan threw: ") + e.what());
    }
    if (outputs.size() != c.expected.size()) {
      result.passed = false;
      return fail(c, "the class's plan returned " + std::to_string(outputs.size()) +
                         " outputs, eager " + std::to_string(c.expected.size()));
    }
    std::string differences;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string d =
          compare_output(outputs[i], c.expected[i], c.bounds[i], result.checked, result.unchecked);
      if (!d.empty()) differences += "  output " + std::to_string(i) + ": " + d + "\n";
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!same_tensor(inputs[i], before[i]))
        differences += "  input " + std::to_string(i) + " was written\n";
    }
    if (!differences.empty()) {
      result.passed = false;
      return fail(c, "the class's plan differs from eager:\n" + differences);
    }
    ++result.bindings_run;
  }
  return done();
}

void SymbolicTally::add(const SymbolicResult& r) {
  ++cases;
  with_sizes += r.size_inputs > 0;
  formed += r.formed;
  kernels += r.generic_kernels;
  run += r.bindings_run;
  skipped += r.bindings_skipped;
  checked += r.checked;
  unchecked += r.unchecked;
  if (!r.passed) {
    failed.push_back(r.seed);
    reports += r.report;
  }
}

std::string SymbolicTally::summary() const {
  return std::to_string(cases) + " cases: " + std::to_string(failed.size()) + " failed; " +
         std::to_string(with_sizes) + " with size inputs, " + std::to_string(formed) +
         " compiled as a shape class (" + std::to_string(kernels) +
         " generic kernels); plans run at " + std::to_string(run) + " bindings, " +
         std::to_string(skipped) + " skipped (another program there, or another plan); " +
         std::to_string(checked) + " output elements checked, " + std::to_string(unchecked) +
         " not (ill-conditioned)";
}

}  // namespace kiln::fuzz
