#!/usr/bin/env bash
# The one script for the GPU machine (see docs/cuda.md).
#
#   scripts/gpu_check.sh --prepare   (here, on the build machine) build the CUDA tests and the
#                                    `surogate` CLI (bench/run_cli_job.sh) for sm_90a
#                                    and collect them plus the non-CUDA shared libraries they
#                                    need into carry/cuda/ and carry/cuda.tar.xz (git-ignored;
#                                    pass the .tar.xz as `carry`: the run unpacks it)
#   scripts/gpu_check.sh             (on the GPU machine) say where cuDNN / NCCL / cuBLASLt live,
#                                    show nvidia-smi, run tests/cuda (then again under
#                                    compute-sanitizer memcheck if present) and the measurements,
#                                    and print a short table. Logs go to $OUT when it is set.
#                                    Also runs tests/runtime_cuda (runtime_cuda_tests and
#                                    models_cuda_tests: decoder fixtures, CUDA bf16 vs CPU fp32)
#                                    tests/train_cuda (TRAIN_FILTER=gtest filter), the data-parallel
#                                    ranks' NCCL path as two processes on one GPU
#                                    (tests/python/test_data_parallel_one_gpu_processes.py) and, with
#                                    BENCH_MODELS="qwen3-0.6b ...", bench/run_surogate.sh.
#                                    SKIP_MEASURE=1 / SKIP_SANITIZER=1 skip those parts.
#
# The GPU image has the CUDA toolkit but none of our Debian libraries (fmt, gtest, ...), so the
# binaries are built here (glibc 2.36, older than the GPU image's, so they run there) and the
# few libraries ldd names outside glibc / libstdc++ / CUDA travel with them.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="${CARRY_DIR:-$root/carry/cuda}"  # another folder under carry/ lets two helpers prepare side by side

if [[ "${1:-}" == "--prepare" ]]; then
  build="${BUILD_DIR:-$root/build-cuda}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null || exit 1
  # CARRY_BINARIES (build-relative paths) carries fewer, e.g. "surogate tests/runtime_cuda/surogate_train_bench"
  # for a benchmark-only call.
  default_binaries="tests/cuda/cuda_tests tests/cuda/cuda_measure tests/runtime_cuda/runtime_cuda_tests
            tests/runtime_cuda/models_cuda_tests tests/runtime_cuda/surogate_train_bench
            tests/train_cuda/train_cuda_tests surogate"
  read -r -a binaries <<<"$(echo ${CARRY_BINARIES:-$default_binaries})"
  cmake --build "$build" -j2 --target "${binaries[@]##*/}" || exit 1
  rm -rf "$carry" && mkdir -p "$carry/lib"
  for binary in "${binaries[@]}"; do cp "$build/$binary" "$carry/"; strip --strip-debug "$carry/${binary##*/}"; done
  for binary in "${binaries[@]}"; do ldd "$carry/${binary##*/}"; done | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      # NCCL (218 MiB) too: the GPU image has it in ldconfig (docs/cuda.md), same soname; and NVRTC
      # (104 MiB, cuDNN's runtime compilation), which its CUDA toolkit has in /usr/local/cuda/lib64.
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda*|libcublas*|libnccl*|libnvrtc*) ;;
      *) cp -L "$lib" "$carry/lib/" ;;
    esac
  done
  # The folder (~210 MiB with the CLI, OpenBLAS, ICU, curl) is over the 64 MiB a device call
  # carries; the xz archive beside it (~41 MiB; gzip was 63 MiB) travels instead and is unpacked on
  # the GPU machine (below).
  rm -f "$carry.tar.gz"
  tar -cf - -C "$(dirname "$carry")" "$(basename "$carry")" | xz -T2 -6 >"$carry.tar.xz" || exit 1
  du -sh "$carry" "$carry.tar.xz"; ls -l "$carry" "$carry/lib"
  exit 0
fi
if [[ ! -x "$carry/cuda_tests" && -f "$carry.tar.xz" ]]; then
  tar -xJf "$carry.tar.xz" -C "$(dirname "$carry")" || exit 1
fi

log_dir="${OUT:-/tmp/gpu_check}"
mkdir -p "$log_dir"
section() { printf '\n=== %s ===\n' "$1"; }

section "libraries (cuDNN, NCCL, cuBLASLt)"
ldconfig -p | grep -E 'libcudnn\.so|libnccl\.so|libcublasLt\.so|libcudart\.so' || echo "ldconfig: none of them registered"
find /usr /opt -maxdepth 6 \( -name 'libcudnn.so*' -o -name 'libnccl.so*' -o -name 'libcublasLt.so*' \) 2>/dev/null | sort
python3 - <<'PY' 2>/dev/null || echo "python3: no nvidia wheels found"
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for path in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "lib*.so*"))):
        if any(name in path for name in ("cudnn.so", "nccl.so", "cublasLt.so")):
            print(path)
PY

section "nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
nvcc --version 2>/dev/null | tail -1

if [[ ! -x "$carry/cuda_tests" ]]; then
  echo "no carried binaries in $carry: run 'scripts/gpu_check.sh --prepare' on the build machine and carry carry/cuda"
  exit 1
fi
# cuBLASLt / cudart come from the GPU machine's own toolkit; fmt from the carried folder.
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
section "dynamic libraries resolved for cuda_tests"
ldd "$carry/cuda_tests" | grep -E 'cublas|cudart|fmt|not found'

section "tests/cuda"
"$carry/cuda_tests" --gtest_output="xml:$log_dir/cuda_tests.xml" 2>&1 | tee "$log_dir/cuda_tests.log" | grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED) |Failure|error|Expected|Which is|relative' | head -120
tests_status=${PIPESTATUS[0]}

runtime_status="not run (no carried runtime_cuda_tests)"
if [[ -x "$carry/runtime_cuda_tests" ]]; then
  section "tests/runtime_cuda (CudaBackend vs CpuBackend)"
  "$carry/runtime_cuda_tests" 2>&1 | tee "$log_dir/runtime_cuda_tests.log" | grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is' | head -60
  runtime_status="exit ${PIPESTATUS[0]}"
fi
models_status="not run (no carried models_cuda_tests)"
if [[ -x "$carry/models_cuda_tests" ]]; then
  section "tests/runtime_cuda models_cuda_tests (decoder fixtures: CUDA bf16 vs CPU fp32)"
  SUROGATE_FIXTURES_DIR="$root/tests/fixtures" "$carry/models_cuda_tests" 2>&1 | tee "$log_dir/models_cuda_tests.log" |
    grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED|measured) |Failure|Expected|Which is|error' | head -120
  models_status="exit ${PIPESTATUS[0]}"
fi

train_status="not run (no carried train_cuda_tests)"
if [[ -x "$carry/train_cuda_tests" ]]; then
  section "tests/train_cuda (trainer and device optimizers: CUDA vs CPU)"
  SUROGATE_SOURCE_DIR="$root" "$carry/train_cuda_tests" ${TRAIN_FILTER:+--gtest_filter="$TRAIN_FILTER"} 2>&1 |
    tee "$log_dir/train_cuda_tests.log" | grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|max \|delta|differ|beyond' | head -120
  train_status="exit ${PIPESTATUS[0]}"
fi

ranks_status="not run (no carried surogate, or no pytest)"
if [[ -x "$carry/surogate" ]] && python3 -c 'import pytest, safetensors' 2>/dev/null; then
  section "tests/python/test_data_parallel_one_gpu_processes.py (two NCCL ranks sharing this GPU)"
  SUROGATE_BIN="$carry/surogate" python3 -m pytest -q -p no:cacheprovider \
    "$root/tests/python/test_data_parallel_one_gpu_processes.py" 2>&1 | tee "$log_dir/one_gpu_ranks.log" | tail -20
  ranks_exit=${PIPESTATUS[0]}
  ranks_status="$(tail -1 "$log_dir/one_gpu_ranks.log") (exit $ranks_exit)"
fi

bench_status="not run (BENCH_MODELS empty)"
if [[ -n "${BENCH_MODELS:-}" && -x "$carry/surogate_train_bench" ]]; then
  section "bench/run_surogate.sh $BENCH_MODELS"
  # shellcheck disable=SC2086
  OUT="$log_dir" bash "$root/bench/run_surogate.sh" $BENCH_MODELS 2>&1 | tee "$log_dir/bench.log"
  bench_status="exit ${PIPESTATUS[0]}"
fi

measure_status="skipped"
if [[ "${SKIP_MEASURE:-0}" != 1 ]]; then
  section "measurements"
  "$carry/cuda_measure" 2>&1 | tee "$log_dir/cuda_measure.log"
  measure_status=${PIPESTATUS[0]}
fi

memcheck_status="not run (compute-sanitizer missing or SKIP_SANITIZER=1)"
if [[ "${SKIP_SANITIZER:-0}" != 1 ]] && command -v compute-sanitizer >/dev/null 2>&1; then
  section "compute-sanitizer memcheck over tests/cuda"
  timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$carry/cuda_tests" >"$log_dir/memcheck.log" 2>&1
  code=$?
  grep -E 'ERROR SUMMARY|Invalid|out of bounds' "$log_dir/memcheck.log" | head -20
  memcheck_status="exit $code"
  section "compute-sanitizer racecheck over the shared-memory kernels"
  timeout 240 compute-sanitizer --tool racecheck --print-limit 20 "$carry/cuda_tests" \
    --gtest_filter='CudaAttention.*:CudaRmsnorm.*:CudaCrossEntropy.*' >"$log_dir/racecheck.log" 2>&1
  code=$?
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$log_dir/racecheck.log" | head -20
  memcheck_status="$memcheck_status; racecheck exit $code"
fi

section "summary"
printf '| step | result |\n| --- | --- |\n'
printf '| tests/cuda | %s |\n' "$(grep -E '^\[  (PASSED|FAILED) ' "$log_dir/cuda_tests.log" | tr '\n' ' ') (exit $tests_status)"
printf '| tests/runtime_cuda | %s |\n' "$runtime_status"
printf '| models_cuda_tests | %s |\n' "$models_status"
printf '| train_cuda_tests | %s |\n' "$train_status"
printf '| two ranks on one GPU | %s |\n' "$ranks_status"
printf '| bench | %s |\n' "$bench_status"
printf '| measurements | exit %s |\n' "$measure_status"
printf '| memcheck | %s |\n' "$memcheck_status"
[[ -f "$log_dir/cuda_measure.log" ]] && grep -E '^\| ' "$log_dir/cuda_measure.log" | grep -v -- '---' | grep -v measurement
exit $tests_status
