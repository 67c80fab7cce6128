// An output the plan writes in place of an input (Kernel::in_place): the generated code must
// load every input an element needs before it stores any output of that element. Values are
// emitted when a store first asks for them, so a later store's loads once came after an earlier
// store into the same memory (fuzzer seed 3976 of the activation ops: a leaky_relu read the
// product written over its input).
#include <vector>

#include "codegen/codegen_harness.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;

TEST(InPlaceCodegenTest, AnEarlierStoreInPlaceOfAnInputDoesNotChangeWhatALaterStoreLoads) {
  constexpr int64_t n = kN;
  // out0 = a * 2 is written over b; out1 = b + 1 must read b as it was.
  Kernel k = make_kernel("in_place_pair", {n}, 0, {F32, F32}, {F32, F32});
  KernelBuilder kb(k);
  kb.store(2, {1}, kb.binary(Op::Mul, kb.load(0, {1}), kb.constant(2, F32), F32));
  kb.store(3, {1}, kb.binary(Op::Add, kb.load(1, {1}), kb.constant(1, F32), F32));
  k.in_place = {{1, 2}};
  for (int bits : vector_widths()) {
    CodegenOptions options;
    options.vector_bits = bits;
    const CompiledKernels compiled = compile_kernels({k}, options);
    std::vector<float> a(n), b(n), out1(n, -1.0f);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = static_cast<float>(i);
      b[i] = static_cast<float>(1000 + i);
    }
    std::vector<void*> p = {a.data(), b.data(), b.data(), out1.data()};
    compiled.kernels.at(0).function(p.data(), nullptr, 0, compiled.kernels[0].range);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[i], 2.0f * static_cast<float>(i)) << i << " at " << bits << " bits";
      ASSERT_EQ(out1[i], static_cast<float>(1001 + i)) << i << " at " << bits << " bits";
    }
  }
}

}  // namespace
}  // namespace kiln::codegen
