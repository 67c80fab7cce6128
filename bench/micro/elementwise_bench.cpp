// Elementwise: the 5-op chain (mul, add, sigmoid, mul, sub) over 16M float32, which kiln fuses
// into one kernel and eager runs as 5 passes over memory, and a plain copy (clone) of the same
// size as the bandwidth yardstick. Both read 64 MB and write a fresh 64 MB tensor per call.
#include "common.h"

namespace kiln_micro {
namespace {

constexpr int64_t kElements = 16 * 1024 * 1024;

const ModelCase kChain{"chain_16m", {{kElements}}, 2 * float_bytes({kElements})};
const ModelCase kCopy{"copy_16m", {{kElements}}, 2 * float_bytes({kElements})};

void chain_16m(benchmark::State& state, Runner runner) {
  run_model(state, kChain, runner);
}
void copy_16m(benchmark::State& state, Runner runner) {
  run_model(state, kCopy, runner);
}

BENCHMARK_CAPTURE(chain_16m, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(chain_16m, kiln, Runner::Kiln)->Apply(big_case);
BENCHMARK_CAPTURE(copy_16m, eager, Runner::Eager)->Apply(big_case);
BENCHMARK_CAPTURE(copy_16m, kiln, Runner::Kiln)->Apply(big_case);

}  // namespace
}  // namespace kiln_micro
