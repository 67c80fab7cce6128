// Output shapes of ops on meta tensors, remembered for the process. The importer learns each op's
// output sizes and strides by running it on meta tensors, and many meta kernels are written in
// Python (batch norm's, relu's, gelu's, hardtanh's: 0.4-1.4 ms a call from C++, with the GIL),
// while a model repeats the same op on the same shapes block after block. A meta kernel is a
// pure function of its inputs' metadata and its other arguments, so its outputs are taken from
// an earlier run with equal ones: ResNet-50's import runs a third of its meta kernels.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <functional>

namespace kiln {

/// Runs `run` on `stack` (the inputs of `schema`'s op; on return its outputs), or puts there
/// fresh meta tensors like the outputs of an earlier run on inputs with the same metadata and
/// the same values for everything that is not a tensor. Only ops that neither write their
/// inputs nor return views of them, whose tensors are all on the meta device, are remembered;
/// others simply run. Thread-safe.
void run_on_meta_remembered(const c10::FunctionSchema& schema,
                            const std::function<void(torch::jit::Stack&)>& run,
                            torch::jit::Stack& stack);

/// How many runs were taken from memory, for tests.
int64_t meta_runs_remembered();

}  // namespace kiln
