// kiln_microbench: Google Benchmark microbenches of kiln against eager LibTorch at kernel level
// (elementwise_bench.cpp, reduction_bench.cpp, overhead_bench.cpp). `make bench-micro` writes
// the models and runs it.
//
//   kiln_microbench [--models_dir=DIR] [--benchmark_...]
//
// DIR: the models bench/make_kernel_models.py writes; default $KILN_BENCH_MODELS, else
// <build dir>/bench_models. Run with MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ raised
// (docs/benchmarking.md) or the 64 MB cases measure page faults.
#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common.h"

int main(int argc, char** argv) {
  // Take --models_dir=DIR / --models_dir DIR out of argv before Google Benchmark reads it.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strncmp(arg, "--models_dir=", 13) == 0) {
      kiln_micro::set_models_dir(arg + 13);
    } else if (std::strcmp(arg, "--models_dir") == 0 && i + 1 < argc) {
      kiln_micro::set_models_dir(argv[++i]);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("models_dir", kiln_micro::models_dir());
  benchmark::AddCustomContext("torch_threads", std::to_string(at::get_num_threads()));
  const char* mmap = std::getenv("MALLOC_MMAP_THRESHOLD_");
  benchmark::AddCustomContext("MALLOC_MMAP_THRESHOLD_",
                              mmap ? mmap : "unset (64 MB cases page-fault)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
