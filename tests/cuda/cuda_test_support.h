// Shared by the CUDA code generator tests: NVRTC compiles for the architectures kiln targets, and
// ptxas (when the toolkit is on this machine) must accept the PTX.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/cuda/nvrtc.h"

namespace kiln::cuda_test {

inline const int kArchitectures[] = {80, 90};

/// The toolkit's ptxas, or "" when there is none.
inline std::string find_ptxas() {
  for (const std::string& dir :
       {std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : ""),
        std::string("/usr/local/cuda")}) {
    if (dir.empty()) continue;
    const std::string path = dir + "/bin/ptxas";
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

/// Runs ptxas on `ptx` for sm_<arch>; "" when it accepted it, else its output.
inline std::string ptxas_rejects(const std::string& ptxas, const std::string& ptx, int arch,
                                 std::string name) {
  // The process id keeps tests that ctest runs side by side out of each other's files.
  const auto dir = std::filesystem::temp_directory_path();
  name += "_" + std::to_string(getpid());
  const std::string input = (dir / (name + ".ptx")).string();
  const std::string output = (dir / (name + ".cubin")).string();
  const std::string log = (dir / (name + ".ptxas.log")).string();
  std::ofstream(input) << ptx;
  const std::string command = ptxas + " -arch=sm_" + std::to_string(arch) + " -o " + output + " " +
                              input + " > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  std::string text;
  if (status != 0) {
    std::ifstream in(log);
    text.assign(std::istreambuf_iterator<char>(in), {});
    if (text.empty()) text = "ptxas exited with status " + std::to_string(status);
  }
  std::filesystem::remove(input);
  std::filesystem::remove(output);
  std::filesystem::remove(log);
  return text;
}

/// NVRTC compiles `source` for every architecture in kArchitectures and ptxas accepts the PTX.
/// `cubin`: NVRTC also assembles it (as kiln does at run time); without it only the toolkit's
/// ptxas does (quicker for big modules). Skips the test (with the reason) when NVRTC is absent.
inline void expect_compiles_for_all_architectures(const std::string& source,
                                                  const std::string& name, bool cubin = true) {
  if (const std::string why = cuda::nvrtc_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) cubin = true;  // NVRTC's own ptxas then checks the PTX
  for (int arch : kArchitectures) {
    cuda::NvrtcOutput out;
    try {
      out = cuda::nvrtc_compile(source, arch, name, cubin);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "sm_" << arch << ": " << e.what();
      continue;
    }
    EXPECT_EQ(out.cubin.empty(), !cubin) << "sm_" << arch;
    EXPECT_NE(out.ptx.find(".target sm_" + std::to_string(arch)), std::string::npos);
    if (!ptxas.empty()) {
      EXPECT_EQ(ptxas_rejects(ptxas, out.ptx, arch, name + "_sm" + std::to_string(arch)), "");
    }
  }
}

}  // namespace kiln::cuda_test
