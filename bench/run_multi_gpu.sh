#!/usr/bin/env bash
# The multi-GPU command (issue 16), for a lent machine with 2 or 4 GPUs: the data-parallel tests,
# then the scaling benchmark, in one call.
#   1. tests: tests/distributed_cuda (the NCCL collectives on every visible GPU), tests/train_cuda
#      CudaDataParallel* (a world of one against the single-GPU device, ZeRO-3 included, and
#      gpus: 2 against one GPU with twice the accumulation, ZeRO-1/2/3), CudaQuantizedBase* (the
#      quantized base under ZeRO-3: sharded, persistent_quants, offload_quants), CudaSequenceParallel*
#      (2 sequence ranks against one GPU, ZeRO-1 and ZeRO-3), CudaPipelineParallel*
#      (2 stages against one GPU, 2 replicas × 2 stages with 4 GPUs) and
#      tests/python/test_data_parallel_gpus_cli.py (the CLI
#      with --gpus=2, and two processes of one GPU each started with the launcher variables, one
#      of them killed; needs pytest).
#   2. scaling: the `surogate` CLI (`surogate pt`, HF folders with random weights made by
#      bench/cli/make_hf_model.py, packed text) for Qwen3-8B LoRA and Qwen3-1.7B full fine-tuning
#      on 1 → 2 → 4 GPUs (as many as are visible), ZeRO-1, ZeRO-2 and ZeRO-3 (weights sharded and
#      gathered per layer: the row whose peak memory per GPU should fall with the GPUs), with the fast settings of
#      bench/run_cli_job.sh (seq 2048, micro-batch 2, grad-accum 4 per GPU, recompute off,
#      lora_dropout 0, adamw_8bit): tokens/s (median of the steps after the first two), tokens/s
#      per GPU, scaling efficiency (tokens/s on N GPUs / (N × on one)), the peak memory of the
#      fullest GPU (nvidia-smi, sampled every 200 ms) beside the dry run's per-GPU prediction;
#      and transformers + PEFT under torchrun DDP on the same GPUs (bench/peers/hf_peft_bench.py;
#      PEERS=0 skips) for the ratio.
# Last run: 2 × H100, 2026-11-25 (docs/benchmarks.md, "Several GPUs"; bench/results/HISTORY.md).
# Here, first: BUILD_DIR=build CARRY_DIR=carry/dp CARRY_BINARIES="surogate tests/train_cuda/train_cuda_tests
# tests/distributed_cuda/distributed_cuda_tests" scripts/gpu_check.sh --prepare; then on the GPU machine
# `bash bench/run_multi_gpu.sh` with carry ["carry/dp.tar.xz"].
# Env: DP_MODELS ("qwen3-8b:lora qwen3-1.7b:full"), DP_GPUS ("1 2 4", capped at the visible GPUs),
# DP_ZERO ("1 2 3"), DP_STEPS (10), TEST_TIMEOUT (300 s a suite; a train_cuda_tests run past it leaves every
# thread's backtrace in $OUT/stall-train_cuda_tests.txt, bench/watchdog.sh), RUN_TIMEOUT (240 s a run),
# DP_TEST_FILTER, DP_PYTEST=0 (skip the CLI's pytest file), SKIP_TESTS=1, SKIP_SCALING=1, PEERS=0, PEER_STEPS (5),
# DP_OPTIONS (YAML lines added to every scaling run; "debug_time_breakdown: true" records each run's
# device_phases_ms: the first GPU's time per step in each phase of the data-parallel step — the
# breakdown runs eagerly, so take the rates from a run without it), MP=1 (also the
# sequence- and pipeline-parallel rows: bench/model_parallel_rows.sh, its header lists them and
# their settings). Records: $OUT/multi_gpu.jsonl, $OUT/model_parallel.jsonl. A device call has 10 minutes: the tests, then one model per call, e.g.
#   SKIP_SCALING=1 bash bench/run_multi_gpu.sh
#   SKIP_TESTS=1 DP_MODELS=qwen3-1.7b:full bash bench/run_multi_gpu.sh
#   SKIP_TESTS=1 DP_MODELS=qwen3-8b:lora bash bench/run_multi_gpu.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
source "$root/bench/watchdog.sh"
use_carry dp surogate || exit 1
log="${OUT:-/tmp/multi_gpu}"
work="${DP_WORK:-/tmp/multi_gpu_work}"
mkdir -p "$log" "$work"
surogate="$CARRY_DIR/surogate"
steps="${DP_STEPS:-10}"
visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -12
status=0

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  printf '\n=== tests (%s GPUs visible) ===\n' "$visible"
  # A collective that never completes must fail the call, not eat it: each suite has TEST_TIMEOUT seconds.
  timeout "${TEST_TIMEOUT:-300}" "$CARRY_DIR/distributed_cuda_tests" 2>&1 | tee "$log/distributed_cuda_tests.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' || status=1
  SUROGATE_SOURCE_DIR="$root" run_watched "${TEST_TIMEOUT:-300}" "$log/stall-train_cuda_tests.txt" "$CARRY_DIR/train_cuda_tests" \
    --gtest_filter="${DP_TEST_FILTER:-CudaDataParallel*:CudaQuantizedBase*:CudaSequenceParallel*:CudaPipelineParallel*}" 2>&1 |
    tee "$log/train_cuda_data_parallel.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|max \|delta' || status=1
  grep -q '^\[  FAILED' "$log/train_cuda_data_parallel.log" "$log/distributed_cuda_tests.log" && status=1
  if [[ "${DP_PYTEST:-1}" == 0 ]]; then
    echo "DP_PYTEST=0: tests/python/test_data_parallel_gpus_cli.py not run"
  elif python3 -c "import pytest" 2>/dev/null; then
    SUROGATE_BIN="$surogate" timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q "$root/tests/python/test_data_parallel_gpus_cli.py" 2>&1 |
      tee "$log/pytest_data_parallel_gpus.log" | tail -3
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  else
    echo "pytest not importable here: tests/python/test_data_parallel_gpus_cli.py not run"
  fi
fi

if [[ "${MP:-0}" == 1 ]]; then  # the sequence- and pipeline-parallel rows (bench/model_parallel_rows.sh)
  bash "$root/bench/model_parallel_rows.sh" || status=1
fi

[[ -f "$work/text.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text.jsonl" 2000 50 600
job_yaml() {  # model_dir out_dir mode gpus zero name
  cat <<YAML
model: $1
output_dir: $2
log_file: $2/log-$6.jsonl
datasets:
  - path: $work/text.jsonl
    type: text
sequence_len: 2048
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
optimizer: adamw_8bit
max_steps: $steps
save_steps: 1000
lora_dropout: 0.0
gpus: $4
zero_level: $5
YAML
  [[ "$3" == full ]] && printf 'lora: false\n'
  for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block recompute_lora; do
    printf '%s: false\n' "$r"
  done
  [[ -n "${DP_OPTIONS:-}" ]] && printf '%s\n' "$DP_OPTIONS"
  return 0
}

[[ "${SKIP_SCALING:-0}" == 1 ]] && exit $status
printf '\n=== scaling ===\n'
zero_levels="${DP_ZERO:-1 2 3}"
first_zero="${zero_levels%% *}"
for spec in ${DP_MODELS:-qwen3-8b:lora qwen3-1.7b:full}; do
  model="${spec%%:*}" mode="${spec##*:}"
  dir="$work/$model"
  [[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" || { status=1; continue; }
  rm -rf "$work/out-$model"  # the first run builds the token cache, the others reuse it
  for zero in $zero_levels; do
    for gpus in ${DP_GPUS:-1 2 4}; do
      (( gpus > visible )) && continue
      (( gpus == 1 && zero != first_zero )) && continue  # one GPU: every level is the same run
      name="$mode-g$gpus-z$zero"
      out="$work/out-$model"
      job_yaml "$dir" "$out" "$mode" "$gpus" "$zero" "$name" >"$work/$model-$name.yaml"
      "$surogate" pt "$work/$model-$name.yaml" --dry-run >"$work/dryrun.txt" 2>&1 || echo "$model $name: dry run failed"
      nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" 2>/dev/null &
      sampler=$!
      timeout "${RUN_TIMEOUT:-240}" "$surogate" pt "$work/$model-$name.yaml" >"$log/$model-$name.log" 2>&1 || { echo "$model $name: exit $?"; status=1; }
      kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
      python3 - "$out/log-$name.jsonl" "$model" "$mode" "$gpus" "$zero" "$work/mem.txt" "$work/dryrun.txt" <<'PY' | tee -a "$log/multi_gpu.jsonl"
import json, re, statistics, sys
path, model, mode, gpus, zero, mem, dry = sys.argv[1:8]
gpus = int(gpus)
try:
    records = [json.loads(l) for l in open(path) if l.startswith("{")]
except OSError:
    records = []
steps = [r for r in records if r.get("type") == "step"]
timed = [r["tokens_per_second"] for r in steps[2:]] or [r["tokens_per_second"] for r in steps]
tps = statistics.median(timed) if timed else 0.0
peaks = {}
for line in open(mem):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[0]) < gpus:
        peaks[int(parts[0])] = max(peaks.get(int(parts[0]), 0), int(parts[1]))
predicted = re.search(r"predicted peak\s+([0-9.]+) GiB", open(dry).read())
record = {"engine": "surogate CLI", "model": model, "mode": mode, "gpus": gpus, "zero_level": zero,
          "tokens_per_s": tps, "tokens_per_s_per_gpu": tps / gpus, "steps": len(steps),
          "peak_mem_gib_per_gpu": [round(peaks[i] / 1024, 2) for i in sorted(peaks)],
          "predicted_peak_gib_per_gpu": float(predicted.group(1)) if predicted else None}
# DP_OPTIONS="debug_time_breakdown: true": the first GPU's milliseconds per step in each phase of the
# data-parallel step (what the scaling loses, and where).
breakdown = next((r for r in records if r.get("type") == "time_breakdown"), None)
if breakdown and "device_phases" in breakdown:
    record["device_phases_ms"] = {row["op"]: round(row["ms"], 3) for row in breakdown["device_phases"]["ops"]}
print(json.dumps(record))
PY
    done
  done
  if [[ "${PEERS:-1}" != 0 ]] && command -v torchrun >/dev/null; then
    for gpus in ${DP_GPUS:-1 2 4}; do
      (( gpus > visible )) && continue
      timeout "${RUN_TIMEOUT:-240}" torchrun --standalone --nproc_per_node "$gpus" "$root/bench/peers/hf_peft_bench.py" --model "$model" --mode "$mode" \
        --steps "${PEER_STEPS:-5}" 2>>"$log/peers.log" | tail -1 | tee -a "$log/multi_gpu_peers.jsonl"
    done
  fi
  rm -rf "$work/out-$model"
done

python3 - "$log" <<'PY'
import json, os, sys
log = sys.argv[1]
def load(name):
    rows = []
    path = os.path.join(log, name)
    if os.path.exists(path):
        for line in open(path):
            try: rows.append(json.loads(line))
            except json.JSONDecodeError: pass
    return rows
runs, peers = load("multi_gpu.jsonl"), [r for r in load("multi_gpu_peers.jsonl") if "tokens_per_s" in r]
base = {(r["model"], r["mode"]): r["tokens_per_s"] for r in runs if r["gpus"] == 1 and r["tokens_per_s"]}
peer = {(r["model"], r["mode"], r["gpus"]): r for r in peers}
peer_base = {(r["model"], r["mode"]): r["tokens_per_s"] for r in peers if r["gpus"] == 1}
print("| model | mode | ZeRO | GPUs | tok/s | tok/s per GPU | scaling efficiency | peak GiB per GPU (max) | predicted GiB | "
      "DDP peer tok/s per GPU | peer efficiency | surogate / peer |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in runs:
    one = base.get((r["model"], r["mode"]))
    efficiency = f"{r['tokens_per_s'] / (r['gpus'] * one):.2f}" if one else "—"
    p = peer.get((r["model"], r["mode"], r["gpus"]))
    p_one = peer_base.get((r["model"], r["mode"]))
    peer_cells = (f"{p['tokens_per_s_per_gpu']:.0f} | " +
                  (f"{p['tokens_per_s'] / (p['gpus'] * p_one):.2f} | " if p_one else "— | ") +
                  (f"{r['tokens_per_s'] / p['tokens_per_s']:.2f}x |" if p["tokens_per_s"] else "— |")) if p else "— | — | — |"
    peak = max(r["peak_mem_gib_per_gpu"], default=0)
    predicted = f"{r['predicted_peak_gib_per_gpu']:.1f}" if r["predicted_peak_gib_per_gpu"] else "—"
    print(f"| {r['model']} | {r['mode']} | {r['zero_level']} | {r['gpus']} | {r['tokens_per_s']:.0f} | "
          f"{r['tokens_per_s_per_gpu']:.0f} | {efficiency} | {peak:.1f} | {predicted} | {peer_cells}")
PY
exit $status
