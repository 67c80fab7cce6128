# kiln's two commands: `make test` and `make bench`. Each sets up what is missing (Debian
# packages, .venv with pinned torch, CMake configure), builds with Ninja, and runs.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= 2
VENV_PY := .venv/bin/python
FORMAT_FILES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all setup build python test bench models format format-check clean

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

test: build python models
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build python models
	@$(VENV_PY) bench/run.py --build $(BUILD)

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
