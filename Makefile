# kiln's two commands: `make test` and `make bench`. Each sets up what is missing (Debian
# packages, .venv with pinned torch, CMake configure), builds with Ninja, and runs.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= 2
VENV_PY := .venv/bin/python
FORMAT_FILES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all setup build python test bench bench-full bench-compile bench-dynamic bench-kernels bench-profile bench-report models format format-check clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja: | setup
	@torch_dir=$$($(VENV_PY) -c 'import os, torch; print(os.path.dirname(torch.__file__))') && \
	abi=$$($(VENV_PY) -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))') && \
	cmake -S . -B $(BUILD) -G Ninja -DKILN_TORCH_DIR=$$torch_dir -DKILN_TORCH_CXX11_ABI=$$abi \
	      -DKILN_PYTHON=$(CURDIR)/$(VENV_PY) -DPython_EXECUTABLE=$(CURDIR)/$(VENV_PY)

build: setup $(BUILD)/build.ninja
	@cmake --build $(BUILD) -j $(JOBS)

# The Python package, installed into .venv the way users install it (pip install .), from the
# same build tree (nothing is compiled twice).
python: build
	@$(VENV_PY) -m pip install --no-build-isolation --no-deps -q . \
	    -Cbuild-dir=$(BUILD) -Ccmake.define.KILN_BUILD_TESTS=ON

# Test models are written by a script (torch.jit.script / trace), never committed as binaries.
models: build
	@$(VENV_PY) scripts/make_test_models.py $(BUILD)/models

# Tests never touch the user's disk caches of compiled code (kiln's, and Inductor's for the peers):
# each run starts its own, which its test processes share (as a user's processes do).
TEST_CACHE = $(abspath $(BUILD))/test-cache

test: build python models
	@rm -rf $(TEST_CACHE)
	@cd $(BUILD) && KILN_CACHE_DIR=$(TEST_CACHE) TORCHINDUCTOR_CACHE_DIR=$(TEST_CACHE)/torch ctest --output-on-failure -j $(JOBS) --timeout 600

# The bench times what users get: glibc's allocator as it comes (no MALLOC_* variables), so
# large outputs cost whatever page faults they cost each backend (docs/benchmarking.md). The
# kernel-level benches (bench-micro, bench-kernels) raise glibc's thresholds, labelled as such.
# Inductor's on-disk caches are off, and kiln's too (KILN_CACHE=0), so every compile time is a
# cold one.
BENCH_ENV = KILN_LOG=error KILN_CACHE=0 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
TUNED_MALLOC_ENV = MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000

# The bench suite: the quick zoo in <= 10 minutes (bench-full: the whole zoo), every backend.
bench: build python
	@$(BENCH_ENV) $(VENV_PY) bench/run.py --suite quick

bench-full: build python
	@$(BENCH_ENV) $(VENV_PY) bench/run.py --suite full

# First-call times, cold and warm, each in a fresh process with each backend's own caches on
# (docs/compile-times.md).
bench-compile: build python
	@$(VENV_PY) bench/compile_time.py

# Streams of changing input sizes (sequence lengths, batch sizes, KV-cache generation): compile
# counts and stream times against eager and Inductor (docs/dynamic-shapes.md).
bench-dynamic: build python
	@$(VENV_PY) bench/dynamic_shapes.py

# The test models through `kiln run` against LibTorch, and the code generator's kernel cases
# (bench/kernel_cases.py, docs/benchmarking.md).
bench-kernels: build python models
	@$(VENV_PY) bench/kernel_cases.py --build $(BUILD)

# kiln.profile on zoo models with OpenVINO's and ONNX Runtime's profilers beside it
# (docs/profiling.md); CASES=a,b picks the models.
CASES ?=
bench-profile: build python
	@$(BENCH_ENV) $(VENV_PY) bench/profile_zoo.py $(if $(CASES),--cases $(CASES))

# docs/benchmarks.md, docs/benchmarks.png and README.md's table, from bench/results/latest.json
# (written by `make bench`); RESULT=path names another result file.
RESULT ?= bench/results/latest.json
bench-report:
	@$(VENV_PY) bench/report.py $(RESULT)

format:
	@clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: ok"

clean:
	rm -rf $(BUILD)

# PyTorch's OpInfo samples for every op kiln generates kernels for, all of them (make test
# runs 4 per op and dtype).
.PHONY: conformance
conformance: python
	@$(VENV_PY) tests/python/conformance/opinfo_conformance.py

# The differential fuzzer (random fusible graphs, kiln against eager) on a range of seeds.
SEEDS ?= 0:2000
.PHONY: fuzz
fuzz: build
	@$(BUILD)/kiln_fuzz --seeds $(SEEDS)

# The differential fuzzer's symbolic cases: each compiled once as a shape class, its plan run at
# bindings it was not compiled at, against eager there (docs/testing.md).
.PHONY: fuzz-symbolic
fuzz-symbolic: build
	@$(BUILD)/kiln_fuzz --symbolic --seeds $(SEEDS)

# The model fuzzer: random nn.Modules (convolutions, norms, pooling, attention, residuals, ...)
# through torch.compile (inference and a training step) and TorchScript, against eager, on a
# range of seeds (tests/fuzz_models/run.py; reproducers go to $(BUILD)/fuzz_models).
.PHONY: fuzz-models
fuzz-models: python
	@KILN_LOG=error $(VENV_PY) tests/fuzz_models/run.py --seeds $(SEEDS) --out $(BUILD)/fuzz_models

# kiln's C++ suites and the element fuzzer's fixed seeds under AddressSanitizer (leaks too) and
# UndefinedBehaviorSanitizer; the runtime and API under ThreadSanitizer. A build directory each
# (build-asan, build-ubsan, build-tsan); scripts/sanitize.sh.
.PHONY: test-asan test-ubsan test-tsan
test-asan: setup
	@scripts/sanitize.sh address
test-ubsan: setup
	@scripts/sanitize.sh undefined
test-tsan: setup
	@scripts/sanitize.sh thread

# Google Benchmark microbenches at kernel level (bench/micro): eager against kiln on the kernel
# models (written as for the kernel bench), and the executor's per-call overhead, with
# BENCH_ENV as for `make bench`. MICRO_ARGS: more --benchmark_* flags.
MICRO_ARGS ?=
.PHONY: bench-micro
bench-micro: build
	@test -x $(BUILD)/kiln_microbench || { echo "kiln_microbench was not built: Google Benchmark (libbenchmark-dev) is missing; run scripts/setup.sh"; exit 1; }
	@$(VENV_PY) bench/make_kernel_models.py $(BUILD)/bench_models
	@$(BENCH_ENV) $(TUNED_MALLOC_ENV) $(BUILD)/kiln_microbench --models_dir=$(BUILD)/bench_models --benchmark_min_time=0.5 \
	    $(MICRO_ARGS)
