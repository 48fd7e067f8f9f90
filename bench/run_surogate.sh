#!/usr/bin/env bash
# Surogate's CUDA backend on the benchmark job (docs/benchmarks.md): Qwen3 shapes with random
# weights, seq 2048, micro-batch 2, full-model forward + backward steps in bf16. One command on
# the GPU machine, after `scripts/gpu_check.sh --prepare` here carried the binaries:
#
#   bash bench/run_surogate.sh [models...]        (default: qwen3-0.6b qwen3-1.7b)
#
# Writes one JSON record per model to stdout and to $OUT/surogate.jsonl (when OUT is set), with
# TFLOP/s from bench/models.py's FLOP accounting (full fine-tuning: 3 × forward) and MFU against
# the measured bf16 matmul ceiling of bench/results/*-h100-peers.jsonl (786.1 TFLOP/s).
# Env: BENCH_STEPS (10), BENCH_RECOMPUTE (none), BENCH_BIN (carry/cuda/surogate_train_bench).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${BENCH_BIN:-$root/carry/cuda/surogate_train_bench}"
export LD_LIBRARY_PATH="$root/carry/cuda/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(qwen3-0.6b qwen3-1.7b)
out="${OUT:-/tmp}/surogate.jsonl"
ceiling="${BENCH_CEILING_TFLOPS:-786.1}"
status=0
for model in "${models[@]}"; do
  dir="$(mktemp -d)"
  python3 - "$root" "$model" "$dir" <<'PY' || { status=1; continue; }
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from models import MODELS
json.dump(MODELS[sys.argv[2]].hf_config(), open(sys.argv[3] + "/config.json", "w"))
PY
  record="$("$bin" --config "$dir" --name "$model" --seq 2048 --batch 2 --steps "${BENCH_STEPS:-10}" \
             --recompute "${BENCH_RECOMPUTE:-none}" --lmhead-chunks 4)" || { echo "$model: benchmark failed" >&2; status=1; continue; }
  python3 - "$root" "$record" "$ceiling" "$bin" <<'PY' | tee -a "$out"
import json, subprocess, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from models import MODELS
record = json.loads(sys.argv[2])
shape = MODELS[record["model"]]
flops = shape.training_flops_per_token(record["seq_len"], "full")
record["tflops"] = round(record["tokens_per_s"] * flops / 1e12, 2)
record["mfu"] = round(record["tflops"] / float(sys.argv[3]), 4)
record["ceiling_tflops"] = float(sys.argv[3])
record["command"] = "bash bench/run_surogate.sh " + record["model"]
try:
    record["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                      capture_output=True, text=True).stdout.strip()
except OSError:
    pass
print(json.dumps(record))
PY
  rm -rf "$dir"
done
exit $status
