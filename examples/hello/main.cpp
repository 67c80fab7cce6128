// Compiles a TorchScript model with kiln and checks it against LibTorch on one input.
//   hello MODEL.pt SIZE0xSIZE1...
#include <kiln/kiln.h>

#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: hello MODEL.pt SHAPE (e.g. 8x64)\n";
    return 2;
  }
  std::vector<int64_t> shape;
  std::stringstream dims(argv[2]);
  for (std::string d; std::getline(dims, d, 'x');)
    shape.push_back(std::stoll(d));

  torch::jit::Module module = torch::jit::load(argv[1]);
  module.eval();
  kiln::CompiledModule compiled = kiln::compile(module, kiln::CompileOptions::parse("strict=true"));

  torch::NoGradGuard no_grad;
  at::Tensor x = torch::randn(shape);
  at::Tensor expected = module.forward({x}).toTensor();
  at::Tensor actual = compiled.forward({x}).toTensor();
  const double diff = (actual - expected).abs().max().item<double>();
  std::cout << "kiln vs LibTorch max abs diff: " << diff << "\n";
  return diff <= 1e-4 ? 0 : 1;
}
