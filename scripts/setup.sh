#!/usr/bin/env bash
# Sets up everything kiln needs on a fresh Debian machine, and on later runs only what changed:
# Debian packages (LLVM 19, Ninja, ccache, GoogleTest, Google Benchmark), then .venv/ with the
# pinned Python packages.
set -euo pipefail
cd "$(dirname "$0")/.."

# libgl1, libglib2.0-0: OpenCV (pulled in by mmengine) loads them at import.
DEB_PACKAGES=(llvm-19-dev ninja-build ccache cmake g++ googletest libgtest-dev clang-format zlib1g-dev libzstd-dev
              libbenchmark-dev libgl1 libglib2.0-0)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

PYTHON=${PYTHON:-python3}
STAMP=.venv/.kiln-requirements
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
if ! cmp -s scripts/requirements.txt "$STAMP"; then
  echo "setup: installing Python packages from scripts/requirements.txt"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r scripts/requirements.txt
  cp scripts/requirements.txt "$STAMP"
fi
