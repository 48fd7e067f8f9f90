#!/usr/bin/env bash
# The issue's headline job on the GPU machine in one call: the LoRA GPU tests, then the benchmark
# (LoRA r16 all-linear on Qwen3 0.6B / 1.7B / 4B / 8B, full fine-tuning on 0.6B / 1.7B; seq 2048,
# micro-batch 2, grad-accum 4, AdamW in the step). Here, first:
#   CARRY_DIR=carry/cudal BUILD_DIR=build-cudal scripts/gpu_check.sh --prepare
# then run `bash bench/run_lora_job.sh` there with carry ["carry/cudal.tar.gz"] (unpacked here when
# the folder is missing). Logs and
# surogate.jsonl land in $OUT. Env: LORA_MODELS, FULL_MODELS, SKIP_TESTS=1.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARRY_DIR="${CARRY_DIR:-$root/carry/cudal}"
if [[ ! -x "$CARRY_DIR/surogate_train_bench" && -f "$CARRY_DIR.tar.gz" ]]; then
  tar -xzf "$CARRY_DIR.tar.gz" -C "$(dirname "$CARRY_DIR")" || exit 1
fi
export LD_LIBRARY_PATH="$CARRY_DIR/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
log="${OUT:-/tmp/lora_job}"
mkdir -p "$log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
tests="not run"
if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  SUROGATE_FIXTURES_DIR="$root/tests/fixtures" "$CARRY_DIR/models_cuda_tests" >"$log/models_cuda_tests.log" 2>&1
  tests="models_cuda_tests exit $?"
  grep -E '^\[ *(FAILED|PASSED) |measured\] lora|Failure' "$log/models_cuda_tests.log" | head -40
  "$CARRY_DIR/runtime_cuda_tests" >"$log/runtime_cuda_tests.log" 2>&1
  tests="$tests; runtime_cuda_tests exit $?"
  grep -E '^\[ *(FAILED|PASSED) ' "$log/runtime_cuda_tests.log"
fi
OUT="$log" bash "$root/bench/run_surogate.sh" --mode lora ${LORA_MODELS:-qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b} >"$log/bench.log" 2>&1
lora_status=$?
OUT="$log" bash "$root/bench/run_surogate.sh" --mode full ${FULL_MODELS:-qwen3-0.6b qwen3-1.7b} >>"$log/bench.log" 2>&1
full_status=$?
grep -v '^{' "$log/bench.log" | tail -20
echo "tests: $tests; bench lora exit $lora_status, full exit $full_status"
python3 - "$log/surogate.jsonl" <<'PY'
import json, sys
print("| model | mode | tok/s | TFLOP/s | MFU | peak GiB | step ms | optimizer ms |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['model']} | {r['mode']} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | {100*r['mfu']:.1f}% | "
          f"{r['peak_mem_gib']:.1f} | {r['step_ms']:.1f} | {r['optimizer_ms']:.2f} |")
PY
