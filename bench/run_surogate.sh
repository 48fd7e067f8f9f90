#!/usr/bin/env bash
# Surogate's CUDA backend on the benchmark job (docs/benchmarks.md): Qwen3 shapes with random
# weights, seq 2048, micro-batch 2, bf16. One command on the GPU machine, after
# `scripts/gpu_check.sh --prepare` here carried the binaries:
#
#   bash bench/run_surogate.sh [--mode fwd-bwd|lora|full] [models...]   (default: fwd-bwd, 0.6b 1.7b)
#
#   fwd-bwd  full-model forward + backward per micro-batch, no optimizer, packed documents (the
#            first benchmark, 2026-11-22-h100-surogate.jsonl)
#   lora     the issue's job: LoRA r16 on all linear layers, grad-accum 4, AdamW over the adapters
#   full     full fine-tuning: grad-accum 4, AdamW over every weight
# lora and full use one document per row (as the peers' rows), fwd-bwd packed 256..2048 documents.
#
# Writes one JSON record per model to stdout and to $OUT/surogate.jsonl (when OUT is set), with
# TFLOP/s from bench/models.py's FLOP accounting for the mode and MFU against the measured bf16
# matmul ceiling of bench/results/*-h100-peers.jsonl (786.1 TFLOP/s).
# Env: BENCH_STEPS (10), BENCH_WARMUP (3), BENCH_RECOMPUTE (none), BENCH_LMHEAD_CHUNKS (4), BENCH_OPTIMIZER (adamw; or
# adamw_8bit, normuon: the trainer's device optimizers), BENCH_CUDA_GRAPHS (on, as the trainer's
# use_cuda_graphs default; off), BENCH_BATCH_LORA_INPUTS (on, as the CUDA trainer: one low-rank
# product for the q/k/v and one for the gate/up adapters, models/lora.h; off), BENCH_FUSE_LORA_BACKWARD
# (on, as the CUDA trainer: each B product's two gradients from one pass,
# cuda/kernels/low_rank_backward.h; off), CARRY_DIR (carry/cuda),
# BENCH_BIN ($CARRY_DIR/surogate_train_bench).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="${CARRY_DIR:-$root/carry/cuda}"
bin="${BENCH_BIN:-$carry/surogate_train_bench}"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
mode=fwd-bwd
if [[ "${1:-}" == "--mode" ]]; then mode="$2"; shift 2; fi
case "$mode" in fwd-bwd) documents=packed ;; lora|full) documents=full ;;
  *) echo "run_surogate.sh: --mode is fwd-bwd, lora or full, got '$mode'" >&2; exit 2 ;; esac
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(qwen3-0.6b qwen3-1.7b)
out="${OUT:-/tmp}/surogate.jsonl"
ceiling="${BENCH_CEILING_TFLOPS:-786.1}"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
cuda_version="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
cublaslt="$(ls /usr/local/cuda/lib64/libcublasLt.so.* 2>/dev/null | sed -n 's/.*libcublasLt\.so\.\([0-9.]*\)$/\1/p' | sort -V | tail -1)"
status=0
for model in "${models[@]}"; do
  dir="$(mktemp -d)"
  python3 - "$root" "$model" "$dir" <<'PY' || { status=1; continue; }
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from models import MODELS
json.dump(MODELS[sys.argv[2]].hf_config(), open(sys.argv[3] + "/config.json", "w"))
PY
  record="$("$bin" --config "$dir" --name "$model" --mode "$mode" --documents "$documents" --seq 2048 --batch 2 \
             --grad-accum 4 --lora-rank 16 --steps "${BENCH_STEPS:-10}" --warmup "${BENCH_WARMUP:-3}" \
             --recompute "${BENCH_RECOMPUTE:-none}" --lmhead-chunks "${BENCH_LMHEAD_CHUNKS:-4}" --optimizer "${BENCH_OPTIMIZER:-adamw}" \
             --cuda-graphs "${BENCH_CUDA_GRAPHS:-on}" --batch-lora-inputs "${BENCH_BATCH_LORA_INPUTS:-on}" \
             --fuse-lora-backward "${BENCH_FUSE_LORA_BACKWARD:-on}")" || { echo "$model: benchmark failed" >&2; status=1; continue; }
  python3 - "$root" "$record" "$ceiling" "$mode" "$driver" "$cuda_version" "$cublaslt" <<'PY' | tee -a "$out"
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from models import MODELS
record = json.loads(sys.argv[2])
mode = sys.argv[4]
shape = MODELS[record["model"]]
flops = shape.training_flops_per_token(record["seq_len"], "lora" if mode == "lora" else "full", record.get("lora_rank") or 16)
record["tflops"] = round(record["tokens_per_s"] * flops / 1e12, 2)
record["mfu"] = round(record["tflops"] / float(sys.argv[3]), 4)
record["ceiling_tflops"] = float(sys.argv[3])
record["versions"] = {"driver": sys.argv[5], "cuda": sys.argv[6], "cublaslt": sys.argv[7]}
prefix = f"BENCH_OPTIMIZER={record['optimizer']} " if record.get("optimizer") not in (None, "none", "adamw") else ""
if record.get("cuda_graphs") is False:
    prefix += "BENCH_CUDA_GRAPHS=off "
if record["mode"] == "lora" and not record.get("batch_lora_inputs"):
    prefix += "BENCH_BATCH_LORA_INPUTS=off "
if record["mode"] == "lora" and not record.get("fuse_lora_backward"):
    prefix += "BENCH_FUSE_LORA_BACKWARD=off "
record["command"] = f"{prefix}bash bench/run_surogate.sh --mode {mode} {record['model']}"
print(json.dumps(record))
PY
  rm -rf "$dir"
done
exit $status
