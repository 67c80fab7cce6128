// Elementwise kernels that transpose (schedule.h: transposes; transpose_emitter.h), against the
// reference interpreter: layout conversions with tails in both tiled dims (a partial tile of
// rows, columns past the last whole vector at every width), two-dim ones, other dtypes, several
// loads and stores around the transposed one, run whole and in uneven pieces of the range.
#include "backend/codegen/llvm/schedule.h"
#include "codegen/codegen_harness.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;

/// NCHW -> NHWC as the collapsed kernel sees it: [n, hw, c], read with c strided by hw.
Kernel to_channels_last(DType t, int64_t n, int64_t hw, int64_t c) {
  Kernel k = make_kernel("to_channels_last_" + std::string(ir::dtype_name(t)) + "_" +
                             std::to_string(hw) + "x" + std::to_string(c),
                         {n, hw, c}, 0, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {hw * c, c, 1}, b.load(0, {hw * c, 1, hw}));
  return k;
}

std::vector<Case> transpose_cases() {
  std::vector<Case> cases;
  // 40 rows: two whole tiles and 8 rows; 19 columns: one vector and 3 at 16 lanes, 2 and 3 at 8.
  for (DType t : {F32, F64, F16, I64, B8})
    cases.push_back(make_case(to_channels_last(t, 2, 40, 19),
                              {t == B8 || t == I64 ? random_bits() : uniform(-5, 5)}));
  cases.push_back(make_case(to_channels_last(F32, 1, 16, 16), {uniform(-1, 1)}));
  cases.push_back(make_case(to_channels_last(F32, 3, 48, 64), {uniform(-1, 1)}));
  {
    // Two dims, with work around the transposed load: exp(x^T) * scale[column] + bias[row],
    // stored twice (as float16 too), and the same x read along the columns.
    const int64_t rows = 37, columns = 50;
    Kernel k = make_kernel("transpose_2d_with_neighbours", {rows, columns}, 0, {F32, F32, F32},
                           {F32, F16, F32});
    KernelBuilder b(k);
    const int x_t = b.load(0, {1, rows});
    const int scaled = b.binary(Op::Mul, b.unary(Op::Exp, x_t, F32), b.load(1, {0, 1}), F32);
    const int y = b.binary(Op::Add, scaled, b.load(2, {1, 0}), F32);
    b.store(3, {columns, 1}, y);
    b.store(4, {columns, 1}, b.cast(y, F16));
    b.store(5, {columns, 1}, b.binary(Op::Sub, x_t, b.load(0, {columns, 1}), F32));
    // exp's error (a few ulp of a value up to 11), or one ulp of the float16 copy
    cases.push_back(make_case(k, {uniform(-2, 2), uniform(0.5, 1.5), uniform(-1, 1)}, [](int) {
      return Tolerance{1, 0, 1e-5};
    }));
  }
  {
    // Two transposed loads from different buffers, one at an offset, and a where.
    const int64_t rows = 33, columns = 17;
    Kernel k = make_kernel("two_transposed_loads", {rows, columns}, 0, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int a = b.load(0, {1, rows});
    const int c = b.load(1, {1, rows + 1}, /*offset=*/1);
    b.store(2, {columns, 1}, b.where(b.binary(Op::Gt, a, c, F32), a, c, F32));
    cases.push_back(make_case(k, {uniform(-1, 1, {kNaN, kInf}), uniform(-1, 1)}));
  }
  return cases;
}

TEST(TransposeCodegenTest, TheScheduleTilesOnlyTransposes) {
  EXPECT_TRUE(transposes(collapse_dims(to_channels_last(F32, 2, 40, 19))));
  const KernelLaunch launch = choose_launch(collapse_dims(to_channels_last(F32, 2, 40, 19)));
  EXPECT_EQ(launch.range, 2 * 3);  // per image, tiles of 16 of the 40 rows
  // A plain copy, a tensor too narrow for a tile, a gather whose rows are not contiguous, and
  // a reduction are walked as before.
  Kernel copy = make_kernel("copy", {40, 19}, 0, {F32}, {F32});
  KernelBuilder(copy).store(1, {19, 1}, KernelBuilder(copy).load(0, {19, 1}));
  EXPECT_FALSE(transposes(copy));
  EXPECT_FALSE(transposes(to_channels_last(F32, 2, 40, 8)));
  Kernel strided = make_kernel("strided", {40, 19}, 0, {F32}, {F32});
  KernelBuilder(strided).store(1, {19, 1}, KernelBuilder(strided).load(0, {2, 80}));
  EXPECT_FALSE(transposes(strided));
  EXPECT_FALSE(transposes(reduce_kernel(ReduceKind::Sum, F32, 40, 19)));
}

TEST(TransposeCodegenTest, TilesMatchTheInterpreter) {
  check(transpose_cases());
}

TEST(TransposeCodegenTest, TilesMatchTheInterpreterInPieces) {
  check(transpose_cases(), Split::Pieces);
}

}  // namespace
}  // namespace kiln::codegen
