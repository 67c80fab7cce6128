#!/bin/bash
# Builds kiln's C++ test suites instrumented with a sanitizer, in a build directory of its own,
# and runs them: `make test-asan`, `make test-ubsan`, `make test-tsan` (docs/testing.md).
#
#   scripts/sanitize.sh address|undefined|thread
#
# kiln's code and its tests are instrumented; LibTorch, LLVM and the kernels kiln compiles at run
# time are not. The suppressions each sanitizer needs for those libraries are in
# scripts/sanitizers/, each with its reason. Exits non-zero on the first finding or failure.
set -euo pipefail

kind=${1:-}
case "$kind" in
  address) dir=build-asan ;;
  undefined) dir=build-ubsan ;;
  thread) dir=build-tsan ;;
  *) echo "usage: $0 address|undefined|thread" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=.venv/bin/python
supp=$root/scripts/sanitizers
torch_dir=$($py -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$($py -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')

cmake -S . -B "$dir" -G Ninja -DKILN_SANITIZE="$kind" -DKILN_BUILD_PYTHON=OFF \
  -DKILN_TORCH_DIR="$torch_dir" -DKILN_TORCH_CXX11_ABI="$abi" -DKILN_PYTHON="$root/$py" >/dev/null

# The suites, and the tests of each that run (gtest filters).
declare -A filters
if [ "$kind" = thread ]; then
  # The runtime and the API, one intra-op thread (the wheel's OpenMP runtime is not
  # instrumented, so its threads would be invisible to TSan): the races that matter are between
  # callers of one CompiledModule.
  filters[kiln_tests]='Threads.*:Executor*:Compile*:Specialize*:Guards*:RunParallel*:BadInput*:SignatureCache*:OutputPool*:Profile*'
  export OMP_NUM_THREADS=1
else
  filters[kiln_passes_tests]='*'
  filters[kiln_codegen_tests]='*'
  filters[kiln_tests]='*'
  # The element fuzzer's fixed seeds (the CUDA emulation runs hundreds of host threads: skipped).
  filters[kiln_fuzz_tests]='Fuzz.FixedSeedsMatchEager:Fuzz.SeedsThatOnceFailedMatchEager:Fuzz.LargeCasesMatchEager'
fi

cmake --build "$dir" -j "${JOBS:-2}" --target "${!filters[@]}"
$py scripts/make_test_models.py "$dir/models" >/dev/null

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
export KILN_LOG=error

status=0
for suite in "${!filters[@]}"; do
  start=$(date +%s)
  if "$dir/tests/$suite" --gtest_filter="${filters[$suite]}" --gtest_brief=1; then
    echo "== $suite under $kind: passed in $(( $(date +%s) - start )) s"
  else
    echo "== $suite under $kind: FAILED"
    status=1
  fi
done
exit $status
