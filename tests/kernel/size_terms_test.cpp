// Size-generic kernels (passes/kernel/size_terms.h): terms on sizes, strides and offsets, bound
// to other size inputs, checked by validate, printed, and kept by collapse_dims for every size.
#include "passes/kernel/size_terms.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/printer.h"
#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

using testing::make_kernel;

SizeTerm term(int64_t coefficient, std::vector<int> factors) {
  return {coefficient, std::move(factors)};
}

// softmax over rows of s1 elements, s0 rows, at size inputs {rows, n}: its row stride is s1.
Kernel generic_softmax(int64_t rows, int64_t n) {
  Kernel k = testing::softmax_kernel(rows, n);
  k.size_inputs = {rows, n};
  k.size_terms = {term(1, {0}), term(1, {1})};
  k.exprs[0].map.stride_terms = {term(1, {1}), std::nullopt};
  k.stores[0].map.stride_terms = {term(1, {1}), std::nullopt};
  return k;
}

// out = x + y over [s0, s1, 64], dense x and out, y broadcast over the first two dims.
Kernel generic_add(int64_t a, int64_t b) {
  Kernel k = make_kernel("add", {a, b, 64}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder builder(k);
  const int x = builder.load(0, {b * 64, 64, 1});
  const int y = builder.load(1, {0, 0, 1});
  builder.store(2, {b * 64, 64, 1}, builder.binary(Op::Add, x, y, DType::Float32));
  k.size_inputs = {a, b};
  k.size_terms = {term(1, {0}), term(1, {1}), std::nullopt};
  k.exprs[x].map.stride_terms = {term(64, {1}), std::nullopt, std::nullopt};
  k.stores[0].map.stride_terms = {term(64, {1}), std::nullopt, std::nullopt};
  return k;
}

std::vector<float> run(const Kernel& k, const std::vector<float>& x) {
  std::vector<float> out(x.size());
  std::vector<float> in = x;
  interpret(k, {in.data(), out.data()});
  return out;
}

TEST(SizeTerms, ABoundKernelComputesWhatOneBuiltForThoseSizesDoes) {
  const Kernel generic = generic_softmax(4, 128);
  validate(generic);
  EXPECT_TRUE(is_size_generic(generic));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-4, 4);
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{3, 5}, {1, 1}, {7, 300}}) {
    const int64_t inputs[] = {rows, n};
    const Kernel bound = bind_sizes(generic, inputs);
    validate(bound);
    EXPECT_EQ(bound.sizes, (std::vector<int64_t>{rows, n}));
    const Kernel plain = without_terms(generic_softmax(rows, n));
    EXPECT_FALSE(is_size_generic(plain));
    std::vector<float> x(rows * n);
    for (float& v : x)
      v = value(rng);
    EXPECT_EQ(run(bound, x), run(plain, x));
  }
  const int64_t too_few[] = {3};
  EXPECT_THROW(bind_sizes(generic, too_few), std::invalid_argument);
}

TEST(SizeTerms, ValidateChecksEveryTermAgainstTheExampleBinding) {
  Kernel k = generic_softmax(4, 128);
  k.sizes[1] = 64;  // not s1 = 128
  EXPECT_THROW(validate(k), std::invalid_argument);
  EXPECT_NE(size_term_problem(k).find("size 1 is 64 but its term s1 gives 128"), std::string::npos)
      << size_term_problem(k);
  k = generic_softmax(4, 128);
  k.exprs[0].map.stride_terms[0] = term(1, {2});  // there are two size inputs
  EXPECT_NE(size_term_problem(k).find("names size input 2 of 2"), std::string::npos);
  k = generic_softmax(4, 128);
  k.size_terms.pop_back();
  EXPECT_NE(size_term_problem(k).find("size terms for 1 of 2 dims"), std::string::npos);
  k = generic_softmax(4, 128);
  k.exprs[0].map.offset = 128;
  k.exprs[0].map.offset_term = term(1, {1});
  EXPECT_EQ(size_term_problem(k), "");
  k.exprs[0].map.offset_term = term(2, {1});
  EXPECT_NE(size_term_problem(k).find("access 0's offset is 128 but its term 2*s1"),
            std::string::npos);
}

TEST(SizeTerms, ThePrinterShowsTermsAndTheExampleBinding) {
  Kernel k = generic_add(2, 3);
  k.exprs[1].map.offset = -6;
  k.exprs[1].map.offset_term = term(-2, {1});
  const std::string text = print_kernel(k);
  EXPECT_NE(text.find("kernel add [s0, s1, 64]\n  sizes s0 = 2, s1 = 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("load b0[64*s1, 64, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("load b1[0, 0, 1]+-2*s1"), std::string::npos) << text;
  EXPECT_EQ(print_term(term(-1, {0, 1})), "-s0*s1");
  EXPECT_EQ(print_term(term(5, {})), "5");
}

TEST(SizeTerms, SameComputationComparesTerms) {
  const Kernel a = generic_add(2, 3);
  Kernel b = a;
  EXPECT_TRUE(same_computation(a, b));
  b.size_terms[0] = std::nullopt;  // the same example values, a constant dim
  EXPECT_FALSE(same_computation(a, b));
  EXPECT_FALSE(same_computation(a, bind_sizes(a, std::vector<int64_t>{5, 3})));
}

TEST(SizeTerms, ShiftedFactorsMultiplyEvaluateAndPrint) {
  // A side past an unpadded stride-2 pool (s0 - 1) times one off its step (2*s1 + 1), times 8.
  const SizeTerm rows{1, {0}, -1}, columns{2, {1}, 1};
  const std::optional<SizeTerm> plane = product(product(columns, rows).value(), term(8, {}));
  ASSERT_TRUE(plane);
  EXPECT_EQ(*plane, (SizeTerm{8, {0, 1}, 0, {{1, -1}, {2, 1}}}));
  EXPECT_EQ(evaluate(*plane, std::vector<int64_t>{5, 4}), 8 * 4 * 9);
  EXPECT_EQ(print_term(*plane), "8*(s0-1)*(2*s1+1)");
  // c * s + d multiplies as gcd(c, d) times a canonical form: 6s - 4 is 2 (3s - 2).
  EXPECT_EQ(product(SizeTerm{6, {0}, -4}, term(1, {1})),
            (SizeTerm{2, {0, 1}, 0, {{3, -2}, {1, 0}}}));
  // A term with a constant and two factors has no product form.
  EXPECT_EQ(product(SizeTerm{1, {0, 1}, 1}, term(1, {0})), std::nullopt);
  // validate checks the forms: canonical (scale >= 1, gcd 1), one per factor, in order.
  Kernel k = generic_add(4, 3);
  k.exprs[0].map.strides[0] = 64 * 2 * 3;
  k.exprs[0].map.stride_terms[0] = SizeTerm{64, {1}, 0, {{2, 0}}};
  EXPECT_NE(size_term_problem(k).find("not in canonical form"), std::string::npos);
  k.exprs[0].map.strides[0] = 64 * 5;
  k.exprs[0].map.stride_terms[0] = SizeTerm{64, {1}, 0, {{1, 2}}};
  EXPECT_EQ(size_term_problem(k), "");
  k.exprs[0].map.stride_terms[0] = SizeTerm{64, {1}, 0, {{1, 2}, {1, 0}}};
  EXPECT_NE(size_term_problem(k).find("forms for"), std::string::npos);
}

TEST(SizeTerms, CollapseMergesOnlyWhatMergesAtEverySize) {
  // Dense [s0, s1, 64] merges into one dim of 64*s0*s1 for x and out, but y broadcasts over the
  // first two dims only: [s0*s1, 64] with y's stride 0 on the merged dim.
  const Kernel collapsed = collapse_dims(generic_add(2, 3));
  validate(collapsed);
  ASSERT_EQ(collapsed.rank(), 2);
  EXPECT_EQ(collapsed.size_terms[0], term(1, {0, 1}));
  EXPECT_EQ(collapsed.sizes, (std::vector<int64_t>{6, 64}));
  EXPECT_EQ(collapsed.exprs[0].map.stride_terms[0], std::nullopt);  // 64: a constant now
  EXPECT_EQ(collapsed.exprs[0].map.strides, (std::vector<int64_t>{64, 1}));
  // Bound elsewhere, it is what collapsing the kernel at those sizes gives.
  const std::vector<int64_t> inputs = {5, 7};
  const Kernel moved = bind_sizes(collapsed, inputs);
  const Kernel direct = collapse_dims(bind_sizes(generic_add(2, 3), inputs));
  EXPECT_EQ(moved.sizes, direct.sizes);
  EXPECT_EQ(moved.exprs[0].map.strides, direct.exprs[0].map.strides);
  // Where two dims look like one run at the example sizes only, they stay apart: here x's dim-0
  // stride is a constant 192, which is 64*s1 at s1 = 3 and at no other s1.
  Kernel k = generic_add(2, 3);
  k.exprs[0].map.stride_terms[0] = std::nullopt;
  const Kernel kept = collapse_dims(k);
  EXPECT_EQ(kept.rank(), 3) << print_kernel(kept);
  EXPECT_EQ(collapse_dims(bind_sizes(generic_add(2, 3), std::vector<int64_t>{2, 3})).rank(), 2);
}

TEST(SizeTerms, ARunTimeDimIsKeptEvenWhereItsExampleIsOne) {
  const Kernel one = collapse_dims(generic_softmax(1, 128));
  EXPECT_EQ(one.rank(), 2) << print_kernel(one);
  Kernel plain = generic_softmax(1, 128);
  plain.size_terms[0] = std::nullopt;
  EXPECT_EQ(collapse_dims(plain).rank(), 1);
}

// How a [s0, s1, 8] iteration space reads or writes a buffer: dense ([8*s1, 8, 1]), through a
// transpose of its first two dims ([8, 8*s0, 1]), broadcast along dim 0 ([0, 8, 1]), or, for a
// row-level store of a kernel that reduces its last dim, dense over the rows ([s1, 1, 0]).
enum class Layout { Dense, Transposed, Broadcast, Rows };

void set_map(IndexMap& map, Layout layout, int64_t s0, int64_t s1) {
  const std::optional<SizeTerm> none;
  switch (layout) {
    case Layout::Dense:
      map.strides = {8 * s1, 8, 1};
      map.stride_terms = {term(8, {1}), none, none};
      break;
    case Layout::Transposed:
      map.strides = {8, 8 * s0, 1};
      map.stride_terms = {none, term(8, {0}), none};
      break;
    case Layout::Broadcast:
      map.strides = {0, 8, 1};
      map.stride_terms = {};
      break;
    case Layout::Rows:
      map.strides = {s1, 1, 0};
      map.stride_terms = {term(1, {1}), none, none};
      break;
  }
}

// out = x * 2 + y over [s0, s1, 8] (or its row sums, reducing the last dim), at size inputs
// {s0, s1}.
Kernel family_member(Layout x, Layout y, Layout out, bool reduces, int64_t s0, int64_t s1) {
  Kernel k = make_kernel("k", {s0, s1, 8}, reduces ? 1 : 0, {DType::Float32, DType::Float32},
                         {DType::Float32});
  KernelBuilder b(k);
  const auto f = DType::Float32;
  const int lx = b.load(0, {});
  set_map(k.exprs[lx].map, x, s0, s1);
  const int ly = b.load(1, {});
  set_map(k.exprs[ly].map, y, s0, s1);
  int value = b.binary(Op::Add, b.binary(Op::Mul, lx, b.constant(2, f), f), ly, f);
  if (reduces) value = b.reduce(ReduceKind::Sum, value);
  b.store(2, {}, value);
  set_map(k.stores[0].map, reduces ? Layout::Rows : out, s0, s1);
  k.size_inputs = {s0, s1};
  k.size_terms = {term(1, {0}), term(1, {1}), std::nullopt};
  return k;
}

// Runs `k` on buffers of `elements` floats each (inputs counting up, outputs zeroed).
std::vector<float> outputs_of(const Kernel& k, int64_t elements) {
  std::vector<float> x(elements), y(elements), out(elements, 0.0f);
  for (int64_t i = 0; i < elements; ++i) {
    x[i] = static_cast<float>(i % 13) - 6;
    y[i] = static_cast<float>(i % 7) * 0.5f;
  }
  interpret(k, {x.data(), y.data(), out.data()});
  return out;
}

TEST(SizeTerms, ACollapsedGenericKernelComputesWhatItsBindingsDo) {
  // For every layout mix, collapsing at the example sizes {2, 3} and binding elsewhere computes
  // what binding first does, including at sizes of 1, where a concrete collapse drops dims.
  const Layout inputs[] = {Layout::Dense, Layout::Transposed, Layout::Broadcast};
  int checked = 0;
  for (Layout x : inputs) {
    for (Layout y : inputs) {
      for (Layout out : {Layout::Dense, Layout::Transposed}) {
        for (bool reduces : {false, true}) {
          const Kernel generic = family_member(x, y, out, reduces, 2, 3);
          validate(generic);
          const Kernel collapsed = collapse_dims(generic);
          validate(collapsed);
          for (auto [s0, s1] : {std::pair<int64_t, int64_t>{1, 1}, {1, 4}, {5, 1}, {3, 7}}) {
            const std::vector<int64_t> at = {s0, s1};
            const int64_t elements = 8 * s0 * s1;
            ASSERT_EQ(outputs_of(bind_sizes(collapsed, at), elements),
                      outputs_of(bind_sizes(generic, at), elements))
                << print_kernel(generic) << "collapsed to\n"
                << print_kernel(collapsed) << "at s0 = " << s0 << ", s1 = " << s1;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 3 * 2 * 2 * 4);
}

}  // namespace
}  // namespace kiln::kernel
