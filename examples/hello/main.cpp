// Compiles a TorchScript model with kiln, checks it against LibTorch on one input, then compiles
// the original module again from what unwrap returns (what a trainer does after wrapping it).
//   hello MODEL.pt SIZE0xSIZE1...
#include <kiln/kiln.h>

#include <iostream>
#include <sstream>

namespace {

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: hello MODEL.pt SHAPE (e.g. 8x64)\n";
    return 2;
  }
  std::vector<int64_t> shape;
  std::stringstream dims(argv[2]);
  for (std::string d; std::getline(dims, d, 'x');)
    shape.push_back(std::stoll(d));
  torch::NoGradGuard no_grad;

  torch::jit::Module module = torch::jit::load(argv[1]);
  kiln::CompiledModule compiled = kiln::compile(module, kiln::CompileOptions::parse("strict=true"));
  at::Tensor x = torch::randn(shape);
  at::Tensor y = compiled.forward({x}).toTensor();

  // The trainer contract: the original module and the exact options, to compile again.
  auto [original, options] = kiln::unwrap(compiled);
  kiln::CompiledModule again = kiln::compile(original, options);

  module.eval();
  const double diff = max_abs_diff(y, module.forward({x}).toTensor());
  const double again_diff = max_abs_diff(again.forward({x}).toTensor(), y);
  std::cout << "kiln vs LibTorch max abs diff: " << diff << "\n"
            << "recompiled vs first compile max abs diff: " << again_diff << "\n";
  return diff <= 1e-4 && again_diff <= 1e-6 && options.strict ? 0 : 1;
}
