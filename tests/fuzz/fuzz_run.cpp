// Running a fuzz case: compile with kiln (fusion on, memory planning), run on the case's inputs,
// and compare each output with eager within the case's error bounds.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "backend/api/compile_graph.h"
#include "fuzz/error_bounds.h"
#include "fuzz/fuzz_case.h"
#include "fuzz/fuzz_support.h"
#include "kiln/options.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "runtime/executor.h"

namespace kiln::fuzz {
namespace {

// --- Running and comparing ---------------------------------------------------------------------

std::string index_string(int64_t flat, at::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return shape_string(index);
}

std::string element_string(const at::Tensor& t, int64_t flat) {
  const at::Tensor e = t.reshape({-1})[flat];
  if (t.scalar_type() == at::kBool) return e.item<bool>() ? "true" : "false";
  if (!is_float(t.scalar_type())) return std::to_string(e.item<int64_t>());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", e.item<double>());
  return buf;
}

}  // namespace

std::string compare_output(const at::Tensor& actual, const at::Tensor& expected,
                           const at::Tensor& bound, int64_t& checked, int64_t& unchecked) {
  if (!actual.defined()) return "kiln returned an undefined tensor";
  if (actual.scalar_type() != expected.scalar_type()) {
    return "dtype: kiln " + dtype_name(actual.scalar_type()) + ", eager " +
           dtype_name(expected.scalar_type());
  }
  if (actual.sizes() != expected.sizes()) {
    return "shape: kiln " + shape_string(actual.sizes()) + ", eager " +
           shape_string(expected.sizes());
  }
  if (expected.numel() == 0) return "";
  at::Tensor bad;
  at::Tensor allowed;
  const at::ScalarType t = expected.scalar_type();
  if (!is_float(t)) {
    bad = actual.ne(expected);
    checked += expected.numel();
  } else {
    const auto k = as64(actual), e = as64(expected);
    const auto skip = at::isinf(bound);
    allowed = at::where(bound == 0, 0.0, at::maximum(bound, rtol_floor(t) * e.abs()));
    const auto same = (k == e) | (at::isnan(k) & at::isnan(e));
    bad = ~(skip | same | ((k - e).abs() <= allowed));
    const int64_t skipped = skip.sum().item<int64_t>();
    unchecked += skipped;
    checked += expected.numel() - skipped;
  }
  const auto flat_bad = bad.reshape({-1});
  if (!flat_bad.any().item<bool>()) return "";
  const int64_t first = at::nonzero(flat_bad)[0][0].item<int64_t>();
  const int64_t count = flat_bad.sum().item<int64_t>();
  std::string s = std::to_string(count) + " of " + std::to_string(expected.numel()) +
                  " elements differ; first at " + index_string(first, expected.sizes()) +
                  ": kiln " + element_string(actual, first) + ", eager " +
                  element_string(expected, first);
  if (allowed.defined()) {
    s += ", allowed difference " + element_string(allowed.reshape(expected.sizes()), first) +
         (element_string(bound, first) == "0" ? " (exact)" : "");
  }
  return s;
}

namespace {

bool same_values(const at::Tensor& a, const at::Tensor& b) {
  if (is_float(a.scalar_type())) {
    return ((a == b) | (at::isnan(a) & at::isnan(b))).all().item<bool>();
  }
  return at::equal(a, b);
}

std::string placement(const CompiledRegion& region) {
  std::string s;
  for (const auto& e : region.entries)
    s += "  " + e.op + ": " + runs_in_name(e.where) + " (" + e.why + ")\n";
  return s;
}

}  // namespace

std::string reproducer(const FuzzCase& c, const std::string& what) {
  std::ostringstream s;
  s << "=== kiln fuzz seed " << c.seed << ": " << what << "\n";
  s << "graph (as generated, before compilation):\n" << c.ir_text;
  s << "inputs:\n";
  for (const auto& note : c.input_notes)
    s << "  " << note << "\n";
  s << "rerun: kiln_fuzz --seeds " << c.seed << ":" << c.seed + 1 << (c.large ? " --large" : "")
    << " --verbose\n";
  return s.str();
}

/// The graph run op by op through ATen on `device` (what eager PyTorch computes there), on the CPU.
std::vector<at::Tensor> eager_on(c10::Device device, const std::string& ir_text,
                                 const std::vector<at::Tensor>& constants,
                                 const std::vector<at::Tensor>& inputs) {
  CompileOptions options;
  options.fusion = false;
  options.strict = true;
  auto region = compile_graph(ir::parse_graph(ir_text), constants, device, options, "eager",
                              /*plan_memory=*/false);
  std::vector<at::Tensor> outputs = run_plan(region->plan, inputs);
  for (auto& output : outputs)
    if (output.defined()) output = output.cpu();
  return outputs;
}

CaseResult run_case(FuzzCase& c, c10::Device device) {
  CaseResult result;
  result.seed = c.seed;
  result.ops = c.num_ops;
  const auto start = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& what) {
    result.report = reproducer(c, what);
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
  std::vector<std::string> output_names;
  for (const ir::Value* v : c.graph->outputs())
    output_names.push_back("%" + (v->name().empty() ? std::to_string(v->id()) : v->name()));
  try {
    ir::parse_graph(c.ir_text);  // the reproducer must be a graph kiln can read back
  } catch (const std::exception& e) {
    return fail(std::string("the printed graph does not parse: ") + e.what());
  }
  std::vector<at::Tensor> inputs, constants, before;
  for (const auto& t : c.inputs) {
    inputs.push_back(t.to(device));
    before.push_back(t.clone());
  }
  for (const auto& t : c.constants)
    constants.push_back(t.to(device));
  CompileOptions options;
  options.fusion = true;
  options.strict = true;  // a group that fails code generation is a failure, not a fallback
  std::shared_ptr<CompiledRegion> region;
  try {
    region = compile_graph(std::move(c.graph), constants, device, options,
                           "fuzz" + std::to_string(c.seed), /*plan_memory=*/true);
  } catch (const std::exception& e) {
    return fail(std::string("compile_graph threw: ") + e.what());
  }
  result.kernels = region->kernels;
  for (const Step& step : region->plan.steps)
    if (const auto* kernel = std::get_if<KernelStep>(&step))
      result.split_reductions += kernel->kernel.finish.has_value();
  result.in_place = region->plan.in_place_writes;
  for (const auto& e : region->entries) {
    result.fused_ops += e.where == RunsIn::FusedKernel;
    // Fusible ops left out of every group, and the ops of groups the lowering gave back.
    result.unlowered_ops += e.where == RunsIn::ExternAten &&
                            (e.why.starts_with("fusible") ||
                             e.why.starts_with("its fusion group could not be lowered"));
  }
  std::vector<at::Tensor> outputs;
  try {
    outputs = run_plan(region->plan, inputs);
    for (auto& output : outputs)
      if (output.defined()) output = output.cpu();
  } catch (const std::exception& e) {
    return fail(std::string("run_plan threw: ") + e.what() + "\nplacement:\n" + placement(*region));
  }
  if (!device.is_cpu()) {
    // The reference on that device: every op through ATen's kernels there (eager), no fusion.
    try {
      c.expected = eager_on(device, c.ir_text, constants, inputs);
    } catch (const std::exception& e) {
      return fail(std::string("eager on ") + device.str() + " threw: " + e.what());
    }
  }
  if (outputs.size() != c.expected.size()) {
    return fail("kiln returned " + std::to_string(outputs.size()) + " outputs, eager " +
                std::to_string(c.expected.size()));
  }
  std::string differences;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].sizes() == c.expected[i].sizes()) {
      for (int64_t d = 0; d < outputs[i].dim(); ++d) {
        if (outputs[i].size(d) > 1 && outputs[i].stride(d) != c.expected[i].stride(d)) {
          ++result.layout_differs;
          break;
        }
      }
    }
    std::string d =
        compare_output(outputs[i], c.expected[i], c.bounds[i], result.checked, result.unchecked);
    if (!d.empty()) {
      differences += "output " + std::to_string(i) + " (" + output_names[i] + " : " +
                     dtype_name(c.expected[i].scalar_type()) + shape_string(c.expected[i].sizes()) +
                     "): " + d + "\n";
    }
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!same_values(inputs[i].cpu(), before[i]))
      differences += "input " + std::to_string(i) + " was modified by the run\n";
  }
  if (!differences.empty())
    return fail("kiln differs from eager\n" + differences + "placement:\n" + placement(*region));
  result.passed = true;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CaseResult run_seed(uint64_t seed, bool all_outputs, c10::Device device, bool large) {
  FuzzCase c;
  try {
    c = make_case(seed, all_outputs, large);
  } catch (const std::exception& e) {
    CaseResult result;
    result.seed = seed;
    result.report = "=== kiln fuzz seed " + std::to_string(seed) +
                    ": the generator threw (a fuzzer bug): " + e.what() + "\n";
    return result;
  }
  return run_case(c, device);
}

}  // namespace kiln::fuzz
