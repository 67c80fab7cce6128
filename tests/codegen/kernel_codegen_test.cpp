// Kernels compiled by the LLVM code generator, run and compared with the reference interpreter
// (the oracle) on copies of the same inputs, at every vector width the host runs.
//
// Tolerances (float outputs; integer and bool outputs are always exact, NaN must meet NaN with any
// payload, +0 equals -0):
//   - exact: copies, casts, +, -, *, /, max, min, floor, trunc, neg, abs, sqrt, reciprocal, where,
//     comparisons, and the same ops on float16/bfloat16 (computed in float32 and rounded once:
//     float32 has more than 2p+2 bits, so that double rounding is innocuous);
//   - float32 exp/log/tanh/erf/sigmoid: the ulp bounds of backend/codegen/llvm/math.h; rsqrt:
//     2 ulp (1/sqrt(x) rounds twice in float32); float16/bfloat16 results of these: 1 ulp of that
//     format; float64 ones: exact (the codegen and the interpreter both call the C library);
//   - a multiply feeding an add may become one FMA: see MultiplyAddMayFuseIntoOneRounding;
//   - float sums: the codegen adds in at least `lanes` = vector_bits/32 independent partial sums,
//     so |got - want| <= (n/lanes + log2(lanes) + 3) * u * sum|x_i| (u = 2^-24 for float32, the
//     recursive-summation bound); kernels built on sums state theirs next to the kernel.
#include "backend/codegen/llvm/kernel_emitter.h"
#include "codegen/codegen_harness.h"
#include "passes/kernel/collapse_dims.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;

// ---- Elementwise -------------------------------------------------------------------------------

TEST(KernelCodegenTest, Float32ChainWithBroadcasting) {
  // out[i][j] = (a[i][j] + row[j]) * col[i] / s - a[i][j], over [13, 37]. No multiply feeds an
  // add, so nothing may fuse into an FMA and every op rounds as the interpreter's does: exact.
  Kernel k = make_kernel("chain", {13, 37}, 0, {F32, F32, F32, F32}, {F32});
  KernelBuilder b(k);
  const int a = b.load(0, {37, 1});
  const int sum = b.binary(Op::Add, a, b.load(1, {0, 1}), F32);
  const int prod = b.binary(Op::Mul, sum, b.load(2, {1, 0}), F32);
  const int q = b.binary(Op::Div, prod, b.load(3, {0, 0}), F32);
  b.store(4, {37, 1}, b.binary(Op::Sub, q, a, F32));
  check({make_case(k, {uniform(-3, 3)})});
}

TEST(KernelCodegenTest, MultiplyAddMayFuseIntoOneRounding) {
  // out = a * row + c. The codegen may contract it into an FMA (one rounding instead of the
  // interpreter's two): the results then differ by at most the product's rounding error, half an
  // ulp of |a * row| <= 16, so 2^-24 * 16, plus one ulp of the result.
  Kernel k = make_kernel("mul_add", {13, 37}, 0, {F32, F32, F32}, {F32});
  KernelBuilder b(k);
  const int prod = b.binary(Op::Mul, b.load(0, {37, 1}), b.load(1, {0, 1}), F32);
  b.store(3, {37, 1}, b.binary(Op::Add, prod, b.load(2, {37, 1}), F32));
  check({make_case(k, {uniform(-4, 4)}, [](int) { return Tolerance{1, 0, 16 * kU32}; })});
}

TEST(KernelCodegenTest, NonContiguousLoadsAndStores) {
  // A transposed load, a load of every other element with an offset, and a transposed store.
  Kernel k = make_kernel("gather_scatter", {13, 37}, 0, {F32, F32}, {F32, F32});
  KernelBuilder b(k);
  const int t = b.load(0, {1, 13});
  const int every_other = b.load(1, {74, 2}, 1);
  const int sum = b.binary(Op::Add, t, every_other, F32);
  b.store(2, {1, 13}, sum);
  b.store(3, {40, 1}, b.binary(Op::Mul, sum, t, F32), 3);  // a padded row-major layout
  check({make_case(k, {uniform(-2, 2)})});
}

TEST(KernelCodegenTest, SizesThatAreNotMultiplesOfTheVectorWidth) {
  std::vector<Case> cases;
  for (int64_t n : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 1000}) {
    Kernel k = make_kernel("tail_" + std::to_string(n), {3, n}, 0, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int x = b.load(0, {n, 1});
    b.store(2, {n, 1}, b.binary(Op::Mul, b.binary(Op::Add, x, b.load(1, {0, 1}), F32), x, F32));
    cases.push_back(make_case(k, {uniform(-5, 5)}));
  }
  check(cases);
}

TEST(KernelCodegenTest, ZeroSizeKernelsWriteNothing) {
  std::vector<Case> cases;
  for (std::vector<int64_t> sizes : {std::vector<int64_t>{0}, {4, 0}, {0, 4}}) {
    Kernel k = make_kernel("empty_" + std::to_string(sizes.size()) + "_" + std::to_string(sizes[0]),
                           sizes, 0, {F32}, {F32});
    KernelBuilder b(k);
    const std::vector<int64_t> strides =
        sizes.size() == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{sizes[1], 1};
    b.store(1, strides, b.unary(Op::Neg, b.load(0, strides), F32));
    cases.push_back(make_case(k, {uniform(-1, 1)}));
  }
  cases.push_back(make_case(reduce_kernel(ReduceKind::Sum, F32, 0, 8), {uniform(-1, 1)}));
  // Rows of zero elements: the sum of nothing is 0.
  cases.push_back(make_case(reduce_kernel(ReduceKind::Sum, F32, 3, 0), {uniform(-1, 1)}));
  check(cases);
}

TEST(KernelCodegenTest, StoreOfAnExpressionOfConstantsOnly) {
  // out0 = 2 + 3 and out1 = int(7.9): values that depend on no load.
  Kernel k = make_kernel("constants", {kN}, 0, {F32}, {F32, I32, F32});
  KernelBuilder b(k);
  b.store(1, {1}, b.binary(Op::Add, b.constant(2, F32), b.constant(3, F32), F32));
  b.store(2, {1}, b.cast(b.constant(7.9, F32), I32));
  b.store(3, {1}, b.binary(Op::Mul, b.load(0, {1}), b.constant(0.5, F32), F32));
  check({make_case(k, {uniform(-1, 1)})});
}

TEST(KernelCodegenTest, EveryFloatUnaryOp) {
  struct Expect {
    Op op;
    ToleranceFor f32;
  };
  const std::vector<Expect> ops = {
      {Op::Neg, exact},
      {Op::Abs, exact},
      {Op::Floor, exact},
      {Op::Trunc, exact},
      {Op::Sqrt, exact},
      {Op::Reciprocal, exact},
      {Op::Rsqrt, ulps(2)},
      {Op::Exp, ulps(kMaxUlpExp)},
      {Op::Log, ulps(kMaxUlpLog)},
      {Op::Tanh, ulps(kMaxUlpTanh)},
      {Op::Erf, ulps(kMaxUlpErf)},
      {Op::Sigmoid, ulps(kMaxUlpSigmoid)},
  };
  std::vector<Case> cases;
  for (const Expect& e : ops) {
    const bool transcendental =
        e.op >= Op::Exp && e.op <= Op::Sigmoid && e.op != Op::Sqrt && e.op != Op::Reciprocal;
    const Fill fill = uniform(e.op == Op::Log ? 0 : -6, 6, kFloatSpecials);
    cases.push_back(make_case(unary_kernel(e.op, F32), {fill}, e.f32));
    cases.push_back(make_case(unary_kernel(e.op, F64), {fill}, exact));
    for (DType t : {F16, BF16})
      cases.push_back(make_case(unary_kernel(e.op, t), {fill}, transcendental ? ulps(1) : exact));
  }
  check(cases);
}

TEST(KernelCodegenTest, EveryIntegerUnaryOp) {
  std::vector<Case> cases;
  for (Op op : {Op::Neg, Op::Abs, Op::Floor, Op::Trunc})
    for (DType t : {I8, U8, I32, I64})
      cases.push_back(make_case(unary_kernel(op, t), {random_bits()}));
  cases.push_back(make_case(unary_kernel(Op::Not, B8), {random_bits()}));
  check(cases);
}

TEST(KernelCodegenTest, EveryFloatBinaryOp) {
  std::vector<Case> cases;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min})
    for (DType t : {F32, F64, F16, BF16})
      cases.push_back(make_case(binary_kernel(op, t, t), {uniform(-8, 8, kFloatSpecials)}));
  check(cases);
}

TEST(KernelCodegenTest, EveryIntegerBinaryOpWraps) {
  std::vector<Case> cases;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min})
    for (DType t : {I8, U8, I32, I64})
      cases.push_back(make_case(binary_kernel(op, t, t), {random_bits()}));
  for (Op op : {Op::And, Op::Or})
    cases.push_back(make_case(binary_kernel(op, B8, B8), {random_bits()}));
  check(cases);
}

TEST(KernelCodegenTest, Int32ArithmeticWrapsAround) {
  Kernel k = make_kernel("wrap_i32", {8}, 0, {I32}, {I32, I32, I32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  b.store(1, {1}, b.binary(Op::Add, x, b.constant(2147483647, I32), I32));
  b.store(2, {1}, b.binary(Op::Mul, x, b.constant(65536, I32), I32));
  b.store(3, {1}, b.unary(Op::Neg, x, I32));
  Case c = make_case(k, {random_bits()});
  const std::vector<int32_t> values = {1, 2, -1, INT32_MIN, INT32_MAX, 65536, 40000, -40000};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(int32_t) * values.size());
  check({c});
}

TEST(KernelCodegenTest, IntegerDivisionIsUnsupported) {
  for (const Kernel& k : {binary_kernel(Op::Div, I32, I32)}) {
    try {
      compile_kernels({k}, {});
      ADD_FAILURE() << k.name << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    }
  }
}

TEST(KernelCodegenTest, Comparisons) {
  std::vector<Case> cases;
  const std::vector<std::pair<DType, Fill>> inputs = {
      {F32, uniform(-3, 3, {kNaN, kInf, -kInf, 0.0, -0.0}, true)},
      {F64, uniform(-3, 3, {kNaN, kInf, 0.0, -0.0}, true)},
      {F16, uniform(-3, 3, {kNaN, -kInf}, true)},
      {BF16, uniform(-3, 3, {kNaN, kInf}, true)},
      {I32, ints(-3, 3)},
      {I64, ints(-3, 3)},
      {I8, ints(-3, 3)},
      {U8, ints(120, 135)},  // both sides of 128: unsigned, not signed, order
      {B8, random_bits()},
  };
  for (Op op : {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge})
    for (const auto& [t, fill] : inputs)
      cases.push_back(make_case(binary_kernel(op, t, B8), {fill}));
  check(cases);
}

TEST(KernelCodegenTest, Where) {
  std::vector<Case> cases;
  for (DType t : {F32, F16, I32, U8, B8, F64}) {
    // out[i][j] = a > b ? a : (broadcast row[j] or a constant, alternating by the row's sign).
    Kernel k =
        make_kernel(std::string("where_") + ir::dtype_name(t), {9, 37}, 0, {t, t, t, F32}, {t});
    KernelBuilder b(k);
    const int a = b.load(0, {37, 1});
    const int row = b.load(2, {0, 1});
    const int pick = b.binary(Op::Lt, b.load(3, {1, 0}), b.constant(0, F32), B8);
    const int other = b.where(pick, row, b.constant(1, t), t);
    b.store(4, {37, 1}, b.where(b.binary(Op::Gt, a, b.load(1, {37, 1}), B8), a, other, t));
    cases.push_back(make_case(k, {ints(-5, 5), ints(-5, 5), ints(-5, 5), uniform(-1, 1)}));
  }
  check(cases);
}

// ---- Casts -------------------------------------------------------------------------------------

// Values each source dtype can hold that convert to `to` without undefined behaviour (float ->
// int with the result in range), with fractions so that truncation shows.
Fill cast_inputs(DType from, DType to) {
  if (!ir::is_floating(from))
    return from == I64 && ir::is_floating(to) ? ints(-0x1p53, 0x1p53) : random_bits();
  switch (to) {
    case DType::Bool:
      return uniform(-2, 2, {0.0, -0.0, kNaN, kInf, -kInf, 1e-40});
    case DType::Int8:
      return uniform(-127, 126, {-0.5, 0.5, -127.9, 126.9});
    case DType::UInt8:
      return uniform(0, 254, {0.5, 0.0, 254.9});
    case DType::Int32:
      return uniform(-2e9, 2e9, {-2.5, 2.5, -0.9});
    case DType::Int64:
      return uniform(-1e18, 1e18, {-2.5, 2.5, -0.9});
    default:
      return uniform(-7e4, 7e4, kFloatSpecials);  // past float16's range
  }
}

TEST(KernelCodegenTest, CastsBetweenEveryPairOfDtypes) {
  const std::vector<DType> dtypes = {F32, F64, I32, I64, I8, U8, B8, F16, BF16};
  std::vector<Case> cases;
  for (DType from : dtypes)
    for (DType to : dtypes) {
      if (from == to) continue;
      Fill fill = cast_inputs(from, to);
      // float16/bfloat16 cannot hold the int32/int64 ranges: keep them finite and in range.
      if ((from == F16 || from == BF16) && (to == I32 || to == I64))
        fill = uniform(-6e4, 6e4, {-2.5, 2.5});
      cases.push_back(make_case(cast_kernel(from, to), {fill}));
    }
  check(cases);
}

TEST(KernelCodegenTest, FloatToIntCastTruncatesTowardZero) {
  Case c = make_case(cast_kernel(F32, I32, 6), {uniform(0, 0)});
  const std::vector<float> values = {2.7f, -2.7f, 0.5f, -0.5f, 3.0f, -1e9f};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(float) * values.size());
  check({c});
}

TEST(KernelCodegenTest, FloatToIntegerOfNaNInfAndOutOfRangeMatchesTheInterpreter) {
  // fptosi is poison there; kiln defines these as eager's x86 results (scalar_convert.h).
  const std::vector<double> specials = {
      kNaN, kInf,  -kInf,        3e9,          -3e9,          1e20,         300.7,         -300.7,
      -1.5, 70000, 4294967596.0, 2147483948.0, -2147483948.0, 2147483520.0, -2147483648.0, 9.3e18};
  std::vector<Case> cases;
  for (DType from : {F32, F64, F16, BF16})
    for (DType to : {I64, I32, I8, U8})
      cases.push_back(make_case(cast_kernel(from, to), {uniform(-3e9, 3e9, specials)}));
  check(cases);
}

TEST(KernelCodegenTest, NegativeFloatToUInt8WrapsLikeTorch) {
  // c10's float -> uint8 conversion goes through int64, so -3.7 becomes 253, as the interpreter
  // says.
  check({make_case(cast_kernel(F32, U8), {uniform(-127, 126, {-1.0, -3.7})})});
}

TEST(KernelCodegenTest, Float64ToFloat16RoundsThroughFloat32AsTheInterpreterDoes) {
  // 1 + 2^-11 + 2^-40 rounds to float32 1 + 2^-11, a float16 tie that goes to even (1.0); rounded
  // straight from float64 it would be 1 + 2^-10.
  Case c = make_case(cast_kernel(F64, F16, 4), {uniform(0, 0)});
  const std::vector<double> values = {1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 0.1,
                                      65519.99};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(double) * values.size());
  check({c});
}

// ---- float16 and bfloat16 in memory ------------------------------------------------------------

// Every bit pattern of a 16-bit float, as one input of 65536 elements.
Case every_pattern(Kernel k) {
  Case c = make_case(std::move(k), {uniform(0, 0)});
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    std::memcpy(&c.inputs[0][2 * i], &bits, 2);
  }
  return c;
}

TEST(KernelCodegenTest, SixteenBitFloatRoundTripsAreBitExact) {
  std::vector<Case> cases;
  for (DType t : {F16, BF16}) {
    // out0 = x; out1 = float(x); out2 = (x -> float -> back)
    Kernel k =
        make_kernel(std::string("round_trip_") + ir::dtype_name(t), {65536}, 0, {t}, {t, F32, t});
    KernelBuilder b(k);
    const int x = b.load(0, {1});
    b.store(1, {1}, x);
    const int wide = b.cast(x, F32);
    b.store(2, {1}, wide);
    b.store(3, {1}, b.cast(wide, t));
    cases.push_back(every_pattern(k));
  }
  check(cases);
}

TEST(KernelCodegenTest, Float32To16BitFloatRoundsToNearestEven) {
  // Random float32 bit patterns around the 16-bit formats' ranges (subnormals, overflow, ties).
  const Fill near_half = [](DType, int64_t n, std::mt19937_64& rng) {
    Bytes b(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t exponent = 96 + static_cast<uint32_t>(rng() % 56);  // 2^-31 .. 2^24
      uint32_t bits = (static_cast<uint32_t>(rng()) & 0x807fffffu) | (exponent << 23);
      if (i % 4 == 0) bits = (bits & 0xffffe000u) | 0x1000u;  // a float16 tie
      if (i % 4 == 1) bits = (bits & 0xffff0000u) | 0x8000u;  // a bfloat16 tie
      std::memcpy(&b[4 * i], &bits, 4);
    }
    return b;
  };
  std::vector<Case> cases;
  for (DType t : {F16, BF16}) {
    Kernel k = make_kernel(std::string("narrow_to_") + ir::dtype_name(t), {4099}, 0, {F32}, {t, t});
    KernelBuilder b(k);
    const int x = b.load(0, {1});
    b.store(1, {1}, x);             // the store converts
    b.store(2, {1}, b.cast(x, t));  // the cast converts, the store copies
    cases.push_back(make_case(k, {near_half}));
  }
  check(cases);
}

TEST(KernelCodegenTest, RepeatedKernelsOfAPlanAreCompiledOnce) {
  // Two layers' kernels that compute the same thing share one function; a different one gets its
  // own. Both still compute what the interpreter does.
  auto scale_add = [](const std::string& name, double scale) {
    Kernel k = make_kernel(name, {5, 33}, 0, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int scaled = b.binary(Op::Mul, b.load(0, {33, 1}), b.constant(scale, F32), F32);
    b.store(2, {33, 1}, b.binary(Op::Add, scaled, b.load(1, {0, 1}), F32));
    return k;
  };
  const std::vector<Kernel> plan = {scale_add("layer0", 2.0), scale_add("other", 3.0),
                                    scale_add("layer1", 2.0)};
  const CompiledKernels compiled = compile_kernels(plan, {});
  ASSERT_EQ(compiled.kernels.size(), 3u);
  EXPECT_EQ(compiled.kernels[0].function, compiled.kernels[2].function);
  EXPECT_NE(compiled.kernels[0].function, compiled.kernels[1].function);
  std::vector<float> a(5 * 33), row(33), out(5 * 33);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t j = 0; j < row.size(); ++j)
    row[j] = 0.5f * static_cast<float>(j);
  for (size_t k : {1u, 2u}) {
    void* buffers[] = {a.data(), row.data(), out.data()};
    compiled.kernels[k].function(buffers, nullptr, 0, compiled.kernels[k].range);
    const float scale = k == 1 ? 3.0f : 2.0f;
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], a[i] * scale + row[i % 33]) << "kernel " << k << ", element " << i;
  }
}

TEST(KernelCodegenTest, AKernelAnEarlierPlanCompiledIsReusedWhileThatCodeIsLoaded) {
  // A plan compiled for another input size shares most kernels with the one before it: those
  // come from the earlier plan's code, which stays loaded while the new plan holds it.
  auto scaled = [](const std::string& name, double scale) {
    Kernel k = make_kernel(name, {7, 19}, 0, {F32}, {F32});
    KernelBuilder b(k);
    b.store(1, {19, 1}, b.binary(Op::Mul, b.load(0, {19, 1}), b.constant(scale, F32), F32));
    return k;
  };
  auto first = std::make_unique<CompiledKernels>(compile_kernels({scaled("a", 2.25)}, {}));
  const CompiledKernels second = compile_kernels({scaled("b", 2.25), scaled("c", 4.75)}, {});
  EXPECT_EQ(second.kernels[0].function, first->kernels[0].function);
  EXPECT_NE(second.kernels[1].function, first->kernels[0].function);
  // Other vector widths are other code; a dumped plan compiles all its kernels.
  CodegenOptions narrow;
  narrow.vector_bits = 128;
  EXPECT_NE(compile_kernels({scaled("d", 2.25)}, narrow).kernels[0].function,
            first->kernels[0].function);
  CodegenOptions dumped;
  dumped.dump_prefix = ::testing::TempDir() + "/kiln_kernel_cache_test";
  EXPECT_NE(compile_kernels({scaled("e", 2.25)}, dumped).kernels[0].function,
            first->kernels[0].function);

  first.reset();  // the code the reused kernel lives in stays loaded: `second` holds it
  std::vector<float> in(7 * 19), out(7 * 19);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>(i) - 60.0f;
  void* buffers[] = {in.data(), out.data()};
  second.kernels[0].function(buffers, nullptr, 0, second.kernels[0].range);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], in[i] * 2.25f) << "element " << i;
}

TEST(KernelCodegenTest, TheKernelCacheLetsGoOfCodeNoPlanHolds) {
  Kernel k = make_kernel("once", {3, 11}, 0, {F32}, {F32});
  KernelBuilder b(k);
  b.store(1, {11, 1}, b.binary(Op::Add, b.load(0, {11, 1}), b.constant(8.125, F32), F32));
  KernelCache& cache = KernelCache::instance();
  const CodeVariant variant = code_variant({});
  const Kernel collapsed = kernel::collapse_dims(k);
  const CpuSchedule schedule = schedule_cpu_kernel(collapsed, variant.target);
  const CacheKey key{code_key(collapsed, schedule), schedule_key(schedule), variant};
  {
    const CompiledKernels compiled = compile_kernels({k}, {});
    ASSERT_TRUE(cache.find(key).has_value());
    EXPECT_EQ(cache.find(key)->kernel.function, compiled.kernels[0].function);
  }
  EXPECT_FALSE(cache.find(key).has_value());
}

// Kernels that differ in their outermost size only: a row-broadcast elementwise kernel, a
// one-dim one, and a normalization of rows (x - mean(x)).
Kernel rows_plus_bias(int64_t rows) {
  Kernel k = make_kernel("rows_plus_bias", {rows, 33}, 0, {F32, F32}, {F32});
  KernelBuilder b(k);
  b.store(2, {33, 1}, b.binary(Op::Add, b.load(0, {33, 1}), b.load(1, {0, 1}), F32));
  return k;
}

Kernel flat_scale(int64_t n) {
  Kernel k = make_kernel("flat_scale", {n}, 0, {F32}, {F32});
  KernelBuilder b(k);
  b.store(1, {1}, b.binary(Op::Mul, b.load(0, {1}), b.constant(-1.375, F32), F32));
  return k;
}

Kernel centered_rows(int64_t rows) {
  Kernel k = make_kernel("centered_rows", {rows, 40}, 1, {F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {40, 1});
  b.store(1, {40, 1}, b.binary(Op::Sub, x, b.reduce(kernel::ReduceKind::Mean, x), F32));
  return k;
}

TEST(KernelCodegenTest, KernelsThatDifferInTheirOutermostSizeOnlyShareCode) {
  struct Case {
    Kernel small, large;
    int64_t large_elements;
  };
  const std::vector<Case> cases = {{rows_plus_bias(5), rows_plus_bias(9), 9 * 33},
                                   {flat_scale(1000), flat_scale(1777), 1777},
                                   {centered_rows(6), centered_rows(11), 11 * 40}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.small.name);
    // The same machine code: nothing in it depends on the outermost size.
    EXPECT_EQ(kernels_assembly({c.small}, {}), kernels_assembly({c.large}, {}));
    const CompiledKernels first = compile_kernels({c.small}, {});
    const CompiledKernels second = compile_kernels({c.large}, {});
    EXPECT_EQ(second.reused, 1);
    EXPECT_EQ(second.kernels[0].function, first.kernels[0].function);
    // The launch is the second kernel's own, and the shared code computes it right.
    EXPECT_EQ(second.kernels[0].range, choose_launch(kernel::collapse_dims(c.large)).range);
    std::vector<float> in(c.large_elements), bias(33), expected(c.large_elements),
        out(c.large_elements, -7.0f);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i % 23) * 0.25f - 2.0f;
    for (size_t j = 0; j < bias.size(); ++j)
      bias[j] = static_cast<float>(j) * 0.5f;
    const bool has_bias = c.large.num_inputs() == 2;
    std::vector<void*> reference = {in.data()}, actual = {in.data()};
    if (has_bias) {
      reference.push_back(bias.data());
      actual.push_back(bias.data());
    }
    reference.push_back(expected.data());
    actual.push_back(out.data());
    kernel::interpret(c.large, reference);
    second.kernels[0].function(actual.data(), nullptr, 0, second.kernels[0].range);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], expected[i], 1e-5) << "element " << i;
  }
}

TEST(KernelCodegenTest, KernelsShareCodeOnlyWithTheSameSchedule) {
  // Past the stream threshold the schedule streams the output: other code than a small kernel's.
  const CompiledKernels small = compile_kernels({flat_scale(4096)}, {});
  const CompiledKernels large = compile_kernels({flat_scale(int64_t{1} << 21)}, {});
  EXPECT_EQ(large.reused, 0);
  EXPECT_NE(large.kernels[0].function, small.kernels[0].function);
  // Another large size has the same schedule, so the same code, launched over its own range.
  const int64_t n = (int64_t{1} << 21) + 4099;
  const CompiledKernels larger = compile_kernels({flat_scale(n)}, {});
  EXPECT_EQ(larger.reused, 1);
  EXPECT_EQ(larger.kernels[0].function, large.kernels[0].function);
  EXPECT_EQ(larger.kernels[0].range, choose_launch(kernel::collapse_dims(flat_scale(n))).range);
  std::vector<float> in(n), out(n, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    in[i] = static_cast<float>(i % 29) - 3.0f;
  void* buffers[] = {in.data(), out.data()};
  larger.kernels[0].function(buffers, nullptr, 0, larger.kernels[0].range);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], in[i] * -1.375f) << "element " << i;
}

}  // namespace
}  // namespace kiln::codegen
