// Per-call overhead: one add of two 8-element tensors, where the arithmetic is nothing and the
// time is the call: kiln::CompiledModule::forward (signature lookup, executor, one generated
// kernel) against the TorchScript module's forward (the interpreter), and kiln with
// fusion=false (the executor with one extern ATen step).
#include "common.h"

namespace kiln_micro {
namespace {

const ModelCase kAdd{"add_8", {{8}, {8}}, 0};

void add_8(benchmark::State& state, Runner runner) {
  run_model(state, kAdd, runner);
}

BENCHMARK_CAPTURE(add_8, eager, Runner::Eager)->Apply(small_case);
BENCHMARK_CAPTURE(add_8, kiln, Runner::Kiln)->Apply(small_case);
BENCHMARK_CAPTURE(add_8, kiln_fusion_off, Runner::KilnNoFusion)->Apply(small_case);

}  // namespace
}  // namespace kiln_micro
