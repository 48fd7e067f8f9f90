#!/usr/bin/env bash
# Builds Surogate and runs the whole test suite: C++ unit tests (CTest) and the Python oracle
# tests (pytest, comparing against Hugging Face tokenizers / transformers and files they write).
# GPU tests are not run here (CI has no GPU): scripts/gpu_check.sh runs them on a GPU machine.
#   SUROGATE_BUILD_DIR      build folder (default: build)
#   SUROGATE_CUDA_ARCHS     CUDA architectures to compile (default: 90a here, to keep CI fast)
#   SUROGATE_WARNINGS_AS_ERRORS  ON (default): a compiler warning in our own code fails the build
#                           (cmake/SurogateModule.cmake); OFF reuses the ccache of a plain build
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (CMakeLists.txt) keys on relative paths below the checkout, so a fresh clone elsewhere
# (CI) reuses what an earlier build compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"

build_dir=${SUROGATE_BUILD_DIR:-build}
jobs=$(nproc)
# -USUROGATE_CUDA: on where nvcc is found, also after a CPU-only quick start in the same folder.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -USUROGATE_CUDA \
  -DCMAKE_CUDA_ARCHITECTURES="${SUROGATE_CUDA_ARCHS:-90a}" \
  -DSUROGATE_WARNINGS_AS_ERRORS="${SUROGATE_WARNINGS_AS_ERRORS:-ON}" >/dev/null
cmake --build "$build_dir" -j "$jobs"

export SUROGATE_BIN="$PWD/$build_dir/surogate" SUROGATE_BUILD_DIR="$PWD/$build_dir"
status=0
# The CPU-only build (SUROGATE_CUDA_ARCHS=cpu in scripts/quickstart.sh, or a machine without nvcc):
# the CLI must build and link without the CUDA sources (it once did not: the trainer called a
# function only a CUDA source defined).
cmake -S . -B "$build_dir-cpu-only" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSUROGATE_CUDA=OFF -DSUROGATE_TESTS=OFF \
  -DSUROGATE_WARNINGS_AS_ERRORS="${SUROGATE_WARNINGS_AS_ERRORS:-ON}" >/dev/null
{ cmake --build "$build_dir-cpu-only" -j "$jobs" --target surogate && "$build_dir-cpu-only/surogate" --version; } ||
  { echo "the CPU-only build (SUROGATE_CUDA=OFF) failed" >&2; status=1; }
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 600) || status=1
python3 -m pytest -q tests/python || status=1
exit $status
