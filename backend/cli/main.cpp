// The `kiln` command-line tool: explain where each op of a model runs, run it under kiln and
// LibTorch on the same random inputs and compare, or profile where kiln's time goes.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// The peers' side of `kiln profile --peers`: OpenVINO's and ONNX Runtime's own profilers, run
// by kiln's Python package (`python -m kiln.profile_peers`, with KILN_PYTHON or python3), which
// prints them beside kiln's profile, read from a temporary file. OpenVINO runs at f32, or at its
// default precision where the options say precision=bf16.
int profile_peers(const Arguments& args, const kiln::Profile& profile) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::string path = dir + "/kiln-profile-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    std::cerr << "kiln: cannot create a temporary file in " << dir
              << " for the peers' profile; set TMPDIR to a writable directory\n";
    return 1;
  }
  close(fd);
  std::ofstream(path) << profile.to_json();
  const char* python = std::getenv("KILN_PYTHON");
  std::vector<std::string> command = {python && *python ? python : "python3",
                                      "-m",
                                      "kiln.profile_peers",
                                      args.model,
                                      "--kiln-profile",
                                      path,
                                      "--iters",
                                      std::to_string(args.iters),
                                      "--rows",
                                      std::to_string(args.rows)};
  if (args.json) command.push_back("--json");
  // A bf16 compile's peer is OpenVINO at its default precision (bf16 where the CPU has it).
  if (kiln::CompileOptions::parse(args.options).precision == kiln::Precision::BF16) {
    command.push_back("--peer-precision");
    command.push_back("default");
  }
  for (const auto& input : args.inputs) {
    command.push_back("--input");
    command.push_back(input.text);
  }
  std::vector<char*> argv;
  for (auto& word : command)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  std::cout << std::flush;
  pid_t pid = 0;
  int status = 0;
  const int spawned = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (spawned == 0) waitpid(pid, &status, 0);
  std::remove(path.c_str());
  if (spawned != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "kiln: the peers' profile did not run (" << command[0]
              << " -m kiln.profile_peers); set KILN_PYTHON to a Python that has kiln, and "
                 "openvino or onnxruntime, installed\n";
    return 1;
  }
  return 0;
}

int profile_model(const Arguments& args, const kiln::CompiledModule& compiled) {
  torch::NoGradGuard no_grad;
  const kiln::Profile profile = compiled.profile(random_inputs(args), args.iters);
  if (!args.json) std::cout << "kiln: " << profile.to_text(args.rows);
  if (args.peers) return profile_peers(args, profile);  // with --json, it prints kiln's too
  if (args.json) std::cout << profile.to_json() << std::endl;
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
  if (args.command == "cache") {
    if (args.cache_action == "clear") kiln::clear_cache();
    std::cout << kiln::cache_info().to_text();
    return 0;
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
    if (args.command == "profile") return profile_model(args, compiled);
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
