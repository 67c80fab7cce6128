// The `kiln` command-line tool: explain where each op of a model runs, or run it under kiln and
// LibTorch on the same random inputs and compare.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <ATen/Parallel.h>

#include "backend/cli/arguments.h"
#include "kiln/kiln.h"

namespace {

using kiln::cli::Arguments;

at::ScalarType dtype_of(const std::string& name) {
  if (name == "float64") return at::kDouble;
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "int64") return at::kLong;
  if (name == "int32") return at::kInt;
  if (name == "bool") return at::kBool;
  return at::kFloat;
}

std::vector<c10::IValue> random_inputs(const Arguments& args) {
  torch::manual_seed(0);
  std::vector<c10::IValue> inputs;
  for (const auto& spec : args.inputs) {
    if (spec.is_int) {
      inputs.emplace_back(spec.int_value);
      continue;
    }
    const at::ScalarType dtype = dtype_of(spec.dtype);
    if (at::isFloatingType(dtype)) {
      inputs.emplace_back(torch::randn(spec.sizes, torch::dtype(dtype)));
    } else {
      inputs.emplace_back(
          torch::randint(0, dtype == at::kBool ? 2 : 10, spec.sizes, torch::dtype(dtype)));
    }
  }
  return inputs;
}

void flatten(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor())
    out.push_back(value.toTensor());
  else if (value.isTuple())
    for (const auto& item : value.toTupleRef().elements())
      flatten(item, out);
  else if (value.isList())
    for (const auto& item : value.toListRef())
      flatten(item, out);
}

double max_abs_diff(const c10::IValue& a, const c10::IValue& b) {
  std::vector<at::Tensor> xs, ys;
  flatten(a, xs);
  flatten(b, ys);
  if (xs.size() != ys.size()) return std::numeric_limits<double>::infinity();
  double diff = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].sizes() != ys[i].sizes()) return std::numeric_limits<double>::infinity();
    if (xs[i].numel() == 0) continue;
    auto d = (xs[i].to(at::kDouble) - ys[i].to(at::kDouble)).abs();
    // nan in the same place on both sides is agreement, anywhere else it is a difference.
    auto same_nan = xs[i].to(at::kDouble).isnan() & ys[i].to(at::kDouble).isnan();
    d = d.masked_fill(same_nan, 0).nan_to_num(std::numeric_limits<double>::infinity());
    diff = std::max(diff, d.max().item<double>());
  }
  return diff;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

int run_model(const Arguments& args, torch::jit::Module& module,
              const kiln::CompiledModule& compiled) {
  const auto inputs = random_inputs(args);
  torch::NoGradGuard no_grad;
  const c10::IValue actual = compiled.forward(inputs);  // first, so kiln reports bad inputs
  const c10::IValue expected = module.forward(inputs);
  const double diff = max_abs_diff(actual, expected);
  std::vector<double> kiln_ms, reference_ms;
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < args.iters; ++i) {  // interleaved, so machine noise hits both alike
    auto t0 = clock::now();
    compiled.forward(inputs);
    auto t1 = clock::now();
    module.forward(inputs);
    auto t2 = clock::now();
    kiln_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    reference_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::ostringstream json;
  json << std::setprecision(6) << "{\"model\": \"" << json_escape(args.model)
       << "\", \"max_abs_diff\": " << diff << ", \"kiln_ms\": " << median(kiln_ms)
       << ", \"reference_ms\": " << median(reference_ms) << ", \"iters\": " << args.iters
       << ", \"threads\": " << at::get_num_threads() << "}";
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  try {
    args = kiln::cli::parse_arguments(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const kiln::cli::UsageError& e) {
    std::cerr << "kiln: " << e.what() << "\n" << kiln::cli::usage();
    return 2;
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(args.model);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    std::cerr << "kiln: cannot load '" << args.model << "' as a TorchScript module: " << what
              << "\n";
    return 2;
  }
  module.eval();
  try {
    const auto options = kiln::CompileOptions::parse(args.options);
    const kiln::CompiledModule compiled = kiln::compile(module, options);
    if (args.command == "run") return run_model(args, module, compiled);
    torch::NoGradGuard no_grad;
    const kiln::Explanation explanation = compiled.explain(random_inputs(args));
    std::cout << (args.json ? explanation.to_json() + "\n" : explanation.to_text());
    return 0;
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::cerr << "kiln: " << what.substr(0, what.find("\nException raised from")) << "\n";
    return 1;
  }
}
