// What the lowering tests share: lowering a group's body, and running the kernel through the
// reference interpreter.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "passes/ir/parser.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/lower_group.h"

namespace kiln::kernel::lower_test {

inline Kernel lower(const std::string& body_text) {
  auto body = ir::parse_graph(body_text);
  return lower_group(*body, "g");
}

inline int count_ops(const Kernel& kernel, Op op) {
  int n = 0;
  for (const Expr& e : kernel.exprs)
    n += e.op == op ? 1 : 0;
  return n;
}

// Interprets a kernel whose buffers are all float32: `inputs` in order, then outputs of the
// given element counts.
inline std::vector<std::vector<float>> run_f32(const Kernel& kernel,
                                               std::vector<std::vector<float>> inputs,
                                               const std::vector<size_t>& output_sizes) {
  std::vector<std::vector<float>> outputs;
  for (size_t n : output_sizes)
    outputs.emplace_back(n, -12345.0f);
  std::vector<void*> pointers;
  for (auto& v : inputs)
    pointers.push_back(v.data());
  for (auto& v : outputs)
    pointers.push_back(v.data());
  interpret(kernel, pointers);
  return outputs;
}

// Deterministic, varied test data.
inline std::vector<float> iota_data(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::sin(static_cast<float>(i) * 1.3f + shift) * scale;
  return v;
}

}  // namespace kiln::kernel::lower_test
