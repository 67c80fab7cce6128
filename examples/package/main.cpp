// Ships a compiled model as one file. `save` compiles a TorchScript model for an input shape and
// writes a package; `run`, in another process (or on another machine with the same CPU), loads
// it and runs it without generating code, and checks it against LibTorch.
//   package save MODEL.pt SHAPE PACKAGE      (SHAPE: e.g. 8x64)
//   package run PACKAGE SHAPE
#include <kiln/kiln.h>
#include <kiln/stats.h>

#include <iostream>
#include <sstream>

namespace {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream dims(text);
  for (std::string d; std::getline(dims, d, 'x');)
    shape.push_back(std::stoll(d));
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (!((command == "save" && argc == 5) || (command == "run" && argc == 4))) {
    std::cerr << "usage: package save MODEL.pt SHAPE PACKAGE | package run PACKAGE SHAPE\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  if (command == "save") {
    kiln::CompiledModule compiled = kiln::compile(torch::jit::load(argv[2]));
    compiled.forward({torch::randn(parse_shape(argv[3]))});  // compiles this input signature
    kiln::save(compiled, argv[4]);
    return 0;
  }
  kiln::CompiledModule compiled = kiln::load(argv[2]);  // compiles its signatures from its code
  at::Tensor x = torch::randn(parse_shape(argv[3]));
  at::Tensor y = compiled.forward({x}).toTensor();

  torch::jit::Module module = compiled.original();  // the package's TorchScript module
  module.eval();
  const double diff = (y - module.forward({x}).toTensor()).abs().max().item<double>();
  std::cout << "kiln vs LibTorch max abs diff: " << diff << "\n"
            << "code modules compiled: " << kiln::stats().modules_compiled
            << ", loaded: " << kiln::stats().modules_loaded << "\n";
  return diff <= 1e-4 ? 0 : 1;
}
