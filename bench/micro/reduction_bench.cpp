// Reductions over [4096, 1024] float32 (16 MB): a sum over each row and over each column (small
// outputs), and softmax and layer_norm (a reduction per row, then an elementwise pass writing
// 16 MB).
#include "common.h"

namespace kiln_micro {
namespace {

const std::vector<int64_t> kShape = {4096, 1024};

const ModelCase kRowSum{"row_sum_4096x1024", {kShape}, float_bytes(kShape) + float_bytes({4096})};
const ModelCase kColumnSum{
    "column_sum_4096x1024", {kShape}, float_bytes(kShape) + float_bytes({1024})};
const ModelCase kSoftmax{"softmax_4096x1024", {kShape}, 2 * float_bytes(kShape)};
const ModelCase kLayerNorm{"layer_norm_4096x1024", {kShape}, 2 * float_bytes(kShape)};

void row_sum_4096x1024(benchmark::State& state, Runner runner) {
  run_model(state, kRowSum, runner);
}
void column_sum_4096x1024(benchmark::State& state, Runner runner) {
  run_model(state, kColumnSum, runner);
}
void softmax_4096x1024(benchmark::State& state, Runner runner) {
  run_model(state, kSoftmax, runner);
}
void layer_norm_4096x1024(benchmark::State& state, Runner runner) {
  run_model(state, kLayerNorm, runner);
}

BENCHMARK_CAPTURE(row_sum_4096x1024, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(row_sum_4096x1024, kiln, Runner::Kiln)->Apply(big_case);
BENCHMARK_CAPTURE(column_sum_4096x1024, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(column_sum_4096x1024, kiln, Runner::Kiln)->Apply(big_case);
BENCHMARK_CAPTURE(softmax_4096x1024, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(softmax_4096x1024, kiln, Runner::Kiln)->Apply(big_case);
BENCHMARK_CAPTURE(layer_norm_4096x1024, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(layer_norm_4096x1024, kiln, Runner::Kiln)->Apply(big_case);

}  // namespace
}  // namespace kiln_micro
