// at::parallel_for for every file of kiln's runtime.
//
// at::parallel_for is a header template: with ATen's OpenMP backend its `#pragma omp parallel`
// is compiled into the caller, and in a file built without -fopenmp the pragma is ignored and the
// whole range runs on the calling thread, silently. run_parallel is compiled once, with OpenMP
// and torch's own libgomp (runtime/CMakeLists.txt), and every parallel loop in kiln goes through
// it; a test fails on a call to at::parallel_for anywhere else.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

/// at::parallel_for over [0, range) with `grain`: split across PyTorch's intra-op threads in
/// one contiguous piece per thread, each at least `grain` long (so torch.set_num_threads holds
/// and nothing oversubscribes); inline on the calling thread when range <= grain.
void run_parallel(int64_t range, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace kiln
