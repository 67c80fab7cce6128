// The codegen benchmarks: kiln against eager LibTorch (the TorchScript interpreter running the
// same module op by op) on memory- and overhead-bound kernel shapes (an elementwise chain against
// a plain copy, softmax, layer_norm, an MLP), interleaved in one process so machine noise hits
// both alike. Prints one JSON object per case; bench/kernel_cases.py tabulates them.
//
//   kiln_kernel_bench MODELS_DIR [--rounds N]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <ATen/Parallel.h>

#include "kiln/kiln.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times one call in milliseconds, repeating it until at least ~2 ms have passed so that
// microsecond calls are not lost in clock resolution.
template <typename F>
double time_ms(F call) {
  int reps = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    call();
    ++reps;
    elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  } while (elapsed < 2.0);
  return elapsed / reps;
}

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    shape.push_back(std::stoll(item));
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kiln_kernel_bench MODELS_DIR [--rounds N]\n";
    return 2;
  }
  const std::string dir = argv[1];
  int rounds = 15;
  if (argc >= 4 && std::string(argv[2]) == "--rounds") rounds = std::stoi(argv[3]);
  // index.txt: one "name shape" line per case (bench/make_kernel_models.py writes index.json;
  // bench/kernel_cases.py turns it into this to keep JSON parsing out of C++).
  std::ifstream index(dir + "/index.txt");
  std::string name, shape_text;
  torch::NoGradGuard no_grad;
  while (index >> name >> shape_text) {
    torch::jit::Module module = torch::jit::load(dir + "/" + name + ".pt");
    module.eval();
    const kiln::CompiledModule compiled = kiln::compile(module);
    torch::manual_seed(0);
    std::vector<c10::IValue> inputs = {torch::randn(parse_shape(shape_text))};
    const at::Tensor expected = module.forward(inputs).toTensor();
    const at::Tensor actual = compiled.forward(inputs).toTensor();
    const double diff = (expected - actual).abs().max().item<double>();
    std::vector<double> eager_ms, kiln_ms;
    for (int r = 0; r < rounds; ++r) {
      eager_ms.push_back(time_ms([&] { module.forward(inputs); }));
      kiln_ms.push_back(time_ms([&] { compiled.forward(inputs); }));
    }
    const kiln::Explanation explanation = compiled.explain(inputs);
    const double bytes = 2.0 * static_cast<double>(inputs[0].toTensor().nbytes());
    std::cout << std::setprecision(6) << "{\"case\": \"" << name << "\", \"shape\": \""
              << shape_text << "\", \"eager_ms\": " << median(eager_ms)
              << ", \"kiln_ms\": " << median(kiln_ms)
              << ", \"speedup\": " << median(eager_ms) / median(kiln_ms)
              << ", \"kiln_gb_per_s\": " << bytes / median(kiln_ms) / 1e6
              << ", \"eager_gb_per_s\": " << bytes / median(eager_ms) / 1e6
              << ", \"max_abs_diff\": " << diff << ", \"kernels\": " << explanation.fused_kernels
              << ", \"extern\": " << explanation.extern_calls
              << ", \"threads\": " << at::get_num_threads() << ", \"rounds\": " << rounds << "}"
              << std::endl;
  }
  return 0;
}
