#!/usr/bin/env bash
# The issue's headline job on the GPU machine in one call: the LoRA GPU tests, then the benchmark
# (LoRA r16 all-linear on Qwen3 0.6B / 1.7B / 4B / 8B, full fine-tuning on 0.6B / 1.7B; seq 2048,
# micro-batch 2, grad-accum 4, AdamW in the step), each model followed by the same job in
# transformers + PEFT (bench/peers/hf_peft_bench.py: SDPA, bf16, fused AdamW; gradient
# checkpointing only where it would not fit) on the same GPU, and a table with the ratio. Here,
# first:
#   CARRY_DIR=carry/cudal BUILD_DIR=build-cudal scripts/gpu_check.sh --prepare
# then run `bash bench/run_lora_job.sh` there with carry ["carry/cudal.tar.xz"] (unpacked here when
# the folder is missing). Logs, surogate.jsonl and peers.jsonl land in $OUT. Env: LORA_MODELS,
# FULL_MODELS, SKIP_TESTS=1, PEERS=0 (Surogate only), PEER_STEPS (5).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cudal surogate_train_bench || exit 1
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
: >"$log/bench.log"
status=0
# One model: Surogate, then the peer on the same GPU (bench/peers/peer_run.sh).
source "$root/bench/peers/peer_run.sh"
job() {  # mode model
  OUT="$log" bash "$root/bench/run_surogate.sh" --mode "$1" "$2" >>"$log/bench.log" 2>&1 || status=1
  [[ "${PEERS:-1}" == 0 ]] && return
  peer_run "$2" "$1" --steps "${PEER_STEPS:-5}" 2>>"$log/bench.log" >>"$log/peers.jsonl"
}
for model in ${LORA_MODELS:-qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b}; do job lora "$model"; done
for model in ${FULL_MODELS:-qwen3-0.6b qwen3-1.7b}; do job full "$model"; done
grep -v '^{' "$log/bench.log" | tail -20
echo "tests: $tests; bench exit $status"
python3 - "$log/surogate.jsonl" "$log/peers.jsonl" <<'PY'
import json, os, sys
peers = {}
if os.path.exists(sys.argv[2]):
    for line in open(sys.argv[2]):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "tokens_per_s" in r:
            peers[(r["model"], r["mode"])] = r
print("| model | mode | tok/s | TFLOP/s | MFU | peak GiB | step ms | optimizer ms | peer | peer tok/s | ratio |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    peer = peers.get((r["model"], r["mode"]))
    versus = (f"{peer['engine']} | {peer['tokens_per_s']:.0f} | {r['tokens_per_s'] / peer['tokens_per_s']:.2f}x"
              if peer else "— | — | —")
    print(f"| {r['model']} | {r['mode']} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | {100*r['mfu']:.1f}% | "
          f"{r['peak_mem_gib']:.1f} | {r['step_ms']:.1f} | {r['optimizer_ms']:.2f} | {versus} |")
PY
exit $status
