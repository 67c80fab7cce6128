// Every kernel op, on every dtype the kernel IR defines it on (kernel::op_traits), is covered by
// the reference interpreter, the LLVM code generator and the CUDA printer, or is excluded by the
// generator's own declaration (llvm_covers, cuda_covers) and then rejected before any code is
// emitted, with a reason. The per-op tests (kernel_codegen_test.cpp) check the values; this one
// checks that a new op or dtype cannot reach a backend that lacks it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "backend/codegen/cuda/cuda_emitter.h"
#include "backend/codegen/llvm/compile_kernels.h"
#include "codegen/codegen_harness.h"
#include "kiln/error.h"
#include "passes/kernel/interpreter.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;
using kernel::Op;

const std::vector<DType> kDtypes = {F32, F64, F16, BF16, I64, I32, DType::Int16, I8, U8, B8};

// A [kN] kernel applying `op` to loads of `t` (a cast goes to float32, or to int32 from it).
Kernel one_op_kernel(Op op, DType t) {
  switch (op) {
    case Op::Cast:
      return cast_kernel(t, t == F32 ? I32 : F32);
    case Op::Where: {
      Kernel k = make_kernel(std::string("where_") + ir::dtype_name(t), {kN}, 0, {B8, t, t}, {t});
      KernelBuilder b(k);
      b.store(3, {1}, b.where(b.load(0, {1}), b.load(1, {1}), b.load(2, {1}), t));
      return k;
    }
    default:
      if (kernel::op_arity(op) == 1) return unary_kernel(op, t);
      return binary_kernel(op, t, kernel::is_comparison(op) ? B8 : t);
  }
}

bool structural(Op op) {
  // Every kernel has loads and constants; reductions have their own tests and kernel shapes.
  return op == Op::Load || op == Op::Constant || op == Op::Reduce;
}

TEST(OpCoverage, TheTraitsTableIsInTheOrderOfOp) {
  const auto traits = kernel::all_op_traits();
  for (size_t i = 0; i < traits.size(); ++i)
    EXPECT_EQ(static_cast<size_t>(traits[i].op), i) << traits[i].name;
  EXPECT_EQ(traits.back().op, Op::Reduce);  // the last enumerator: no op left out
}

TEST(OpCoverage, EveryDefinedOpIsCoveredByEveryBackendOrDeclaredMissing) {
  std::set<std::string> llvm_missing, cuda_missing;
  for (const kernel::OpTraits& traits : kernel::all_op_traits()) {
    if (structural(traits.op)) continue;
    for (DType t : kDtypes) {
      if (!kernel::defined_on(traits.op, t)) continue;
      const Kernel k = one_op_kernel(traits.op, t);
      const std::string what = std::string(traits.name) + " on " + ir::dtype_name(t);
      Case c = make_case(k, {random_bits()});
      std::vector<Bytes> buffers = c.inputs;
      buffers.emplace_back(buffer_elements(k, k.num_inputs()) *
                           ir::dtype_size(k.buffers.back().dtype));
      std::vector<void*> pointers;
      for (Bytes& b : buffers)
        pointers.push_back(b.data());
      EXPECT_NO_THROW(kernel::interpret(k, pointers)) << "interpreter: " << what;
      if (llvm_covers(traits.op, t)) {
        EXPECT_NO_THROW(compile_kernels({k}, {})) << "LLVM: " << what;
      } else {
        llvm_missing.insert(what);
        try {
          compile_kernels({k}, {});
          ADD_FAILURE() << "LLVM compiled " << what << ", which it declares missing";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
          EXPECT_NE(std::string(e.what()).find("LLVM codegen has no " + what), std::string::npos)
              << e.what();
        }
      }
      if (cuda::cuda_covers(traits.op, t)) {
        EXPECT_NO_THROW(cuda::emit_cuda_module({k})) << "CUDA: " << what;
      } else {
        cuda_missing.insert(what);
      }
    }
  }
  // The exclusions, stated: integer division, which the lowering never asks for.
  EXPECT_EQ(llvm_missing, (std::set<std::string>{"div on i64", "div on i32", "div on i16",
                                                 "div on i8", "div on u8", "div on b8"}));
  EXPECT_TRUE(cuda_missing.empty());
}

TEST(OpCoverage, AnOpOutsideItsOperandDtypesIsNotDefined) {
  EXPECT_FALSE(kernel::defined_on(Op::Exp, I32));
  EXPECT_FALSE(kernel::defined_on(Op::Not, I32));
  EXPECT_FALSE(kernel::defined_on(Op::And, F32));
  EXPECT_TRUE(kernel::defined_on(Op::Lt, B8));
  EXPECT_TRUE(kernel::op_traits(Op::Exp).transcendental);
  EXPECT_FALSE(kernel::op_traits(Op::Sqrt).transcendental);
}

}  // namespace
}  // namespace kiln::codegen
