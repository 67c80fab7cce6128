// Shared by the kiln_microbench files: each benchmark names a model that
// bench/make_kernel_models.py wrote into the models directory, the shapes of its inputs and the
// bytes one call moves; run_model times one call of it, eagerly or through kiln.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln_micro {

/// Who runs the model: the TorchScript interpreter op by op (LibTorch eager), kiln, or kiln with
/// fusion=false (every op an extern ATen step: the executor without generated kernels).
enum class Runner { Eager, Kiln, KilnNoFusion };

struct ModelCase {
  const char* name;                                // MODELS_DIR/<name>.pt
  std::vector<std::vector<int64_t>> input_shapes;  // float32 inputs, torch.randn with seed 0
  int64_t bytes_per_call;                          // read + written; 0: no SetBytesProcessed
};

/// MODELS_DIR: --models_dir=PATH, else $KILN_BENCH_MODELS, else <build dir>/bench_models.
const std::string& models_dir();
void set_models_dir(std::string dir);

/// float32 bytes of a shape.
int64_t float_bytes(const std::vector<int64_t>& shape);

/// Times forward() of the model on its inputs. The module is loaded, compiled and checked
/// against eager (max abs diff 1e-4) once per process and runner, outside the timed loop; a
/// missing model or a mismatch skips the benchmark with the reason. Kiln runs are labelled with
/// their generated kernels and extern calls (kiln::Explanation).
void run_model(benchmark::State& state, const ModelCase& model, Runner runner);

/// Wall-clock time (ATen and kiln run on several threads; CPU time of the main thread would
/// undercount), in milliseconds or microseconds.
void big_case(benchmark::internal::Benchmark* b);
void small_case(benchmark::internal::Benchmark* b);

}  // namespace kiln_micro
