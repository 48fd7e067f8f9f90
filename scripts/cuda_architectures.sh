#!/usr/bin/env bash
# Prints the CUDA architectures to compile, as a CMake list, on stdout, and on stderr one line
# saying which and why. Used by scripts/quickstart.sh.
#   SUROGATE_CUDA_ARCHS unset: the GPUs of this machine (nvidia-smi's compute capability: 9.0 ->
#     90a, 10.0 -> 100a, 12.0 -> 120a, the arch-specific targets the CUTLASS grouped GEMMs need on
#     Hopper; others as they are, 8.6 -> 86), or Hopper (90a) on a machine without one;
#   SUROGATE_CUDA_ARCHS=all: every supported architecture (CMakeLists.txt's list);
#   SUROGATE_CUDA_ARCHS="89;90a": those;
#   SUROGATE_CUDA_ARCHS=cpu: no CUDA kernels (prints "cpu"; the build is the CPU backend only).
set -euo pipefail
cd "$(dirname "$0")/.."

all=$(sed -n 's/.*set(CMAKE_CUDA_ARCHITECTURES "\([0-9a-z;]*\)").*/\1/p' CMakeLists.txt)
[[ -n "$all" ]] || { echo "cuda_architectures.sh: no default CMAKE_CUDA_ARCHITECTURES in CMakeLists.txt" >&2; exit 1; }

case "${SUROGATE_CUDA_ARCHS:-}" in
  all)
    echo "build: CUDA kernels for every supported architecture ($all): SUROGATE_CUDA_ARCHS=all" >&2
    echo "$all"
    exit 0 ;;
  cpu)
    echo "build: no CUDA kernels, the CPU backend only: SUROGATE_CUDA_ARCHS=cpu (this binary never trains on a GPU)" >&2
    echo "cpu"
    exit 0 ;;
  "") ;;
  *)
    echo "build: CUDA kernels for ${SUROGATE_CUDA_ARCHS}: SUROGATE_CUDA_ARCHS" >&2
    echo "$SUROGATE_CUDA_ARCHS"
    exit 0 ;;
esac

caps=""
if command -v nvidia-smi >/dev/null 2>&1; then
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u || true)
fi
archs=()
for cap in $caps; do
  [[ "$cap" =~ ^[0-9]+$ ]] || continue
  arch="$cap"
  [[ ";$all;" == *";${cap}a;"* ]] && arch="${cap}a"  # Hopper / Blackwell: the arch-specific target
  archs+=("$arch")
done
if [[ ${#archs[@]} -gt 0 ]]; then
  list=$(IFS=';'; echo "${archs[*]}")
  echo "build: CUDA kernels for $list: the GPU of this machine (SUROGATE_CUDA_ARCHS=all compiles every supported architecture)" >&2
  echo "$list"
else
  echo "build: CUDA kernels for 90a (Hopper): no GPU on this machine (SUROGATE_CUDA_ARCHS=all compiles every supported architecture, SUROGATE_CUDA_ARCHS=cpu none: a faster build for the CPU)" >&2
  echo "90a"
fi
