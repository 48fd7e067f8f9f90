#!/usr/bin/env bash
# The data-parallel step's phases with two ranks on ONE GPU: two `surogate pt` processes share GPU 0
# as a two-rank NCCL world (each its own NCCL_HOSTID, so NCCL joins them over loopback sockets, as
# tests/python/test_data_parallel_one_gpu_processes.py does), Qwen3-0.6B full fine-tuning (random
# weights, bench/cli/make_hf_model.py; packed text, seq 2048, micro-batch 2, grad-accum 2, ZeRO-1,
# adamw_8bit, recompute off) with debug_time_breakdown: the first rank's GPU time per step in each
# phase of the step (train/device/cuda_rank/step_phases.h), one line per binary.
# What it shows: how many bytes the reduction and the publish move, not how fast several GPUs
# train — loopback sockets carry a few GB/s where NVLink carries hundreds, and the two ranks share
# one GPU's SMs. For scaling, bench/run_multi_gpu.sh on a machine with several GPUs.
# Here: the new binary as usual (CARRY_DIR=carry/dp CARRY_BINARIES=surogate scripts/gpu_check.sh
# --prepare) and, for a before / after, the older one built at its commit,
# `strip -s surogate && xz -6 -c surogate > carry/surogate-before.xz`. On the GPU machine, with carry
# ["carry/dp.tar.xz", "carry/surogate-before.xz"]:
#   bash bench/one_gpu_ranks_phases.sh           (BINARIES="carry/before carry/dp": folders with a
#                                                 `surogate` and its lib/; carry/before is made from
#                                                 the .xz and carry/dp's lib/)
# Env: BINARIES, STEPS (6), MODEL (qwen3-0.6b), ZERO (1), LORA (0; 1: LoRA rank 16 on every
# linear layer instead of full fine-tuning — the weight exchange then carries the adapters), EXTRA (more config lines, e.g.
# "deterministic_attention: true", with which two binaries doing the same math log the same losses
# bit for bit). Records: $OUT/one_gpu_ranks.jsonl.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
source bench/carry_env.sh
[[ -x carry/dp/surogate || ! -f carry/dp.tar.xz ]] || tar -xJf carry/dp.tar.xz -C carry || exit 1
if [[ -f carry/surogate-before.xz && ! -x carry/before/surogate ]]; then
  mkdir -p carry/before && cp -r carry/dp/lib carry/before/ &&
    xz -dc carry/surogate-before.xz >carry/before/surogate && chmod +x carry/before/surogate || exit 1
fi
out="${OUT:-/tmp/one_gpu_ranks}" work=/tmp/one_gpu_ranks_work model="${MODEL:-qwen3-0.6b}"
mkdir -p "$out" "$work"
[[ -f "$work/text.jsonl" ]] || python3 bench/cli/make_text_data.py "$work/text.jsonl" 2000 50 600
[[ -f "$work/$model/config.json" ]] || python3 bench/cli/make_hf_model.py "$model" "$work/$model" || exit 1
port=29631
for binary in ${BINARIES:-carry/before carry/dp}; do
  name=$(basename "$binary")
  run="$work/out-$name"
  rm -rf "$run"
  cat >"$work/$name.yaml" <<YAML
model: $work/$model
output_dir: $run
log_file: $run/log.jsonl
datasets:
  - path: $work/text.jsonl
    type: text
sequence_len: 2048
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
optimizer: adamw_8bit
max_steps: ${STEPS:-6}
save_steps: 1000
lora: $([[ "${LORA:-0}" == 1 ]] && echo "true
lora_rank: 16
lora_alpha: 32" || echo false)
zero_level: ${ZERO:-1}
debug_time_breakdown: true
${EXTRA:-}
YAML
  for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block; do
    printf '%s: false\n' "$r" >>"$work/$name.yaml"
  done
  port=$((port + 1))
  for rank in 0 1; do
    LD_LIBRARY_PATH="$(carry_library_path "$root/$binary"):${LD_LIBRARY_PATH:-}" \
      RANK=$rank WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      NCCL_HOSTID="bench-host-$rank" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
      timeout 400 "$root/$binary/surogate" pt "$work/$name.yaml" --gpus=1 >"$out/$name-rank$rank.log" 2>&1 &
  done
  wait
  python3 - "$run/log.jsonl" "$name" "$model" "${EXTRA:-}" "${LORA:-0}" <<'PY' | tee -a "$out/one_gpu_ranks.jsonl"
import json, statistics, sys
path, name, model = sys.argv[1:4]
records = [json.loads(l) for l in open(path) if l.startswith("{")]
steps = [r for r in records if r.get("type") == "step"]
breakdown = next((r for r in records if r.get("type") == "time_breakdown"), {})
phases = {row["op"]: round(row["ms"], 1) for row in breakdown.get("device_phases", {}).get("ops", [])}
print(json.dumps({"binary": name, "model": model, "setup": "2 processes on one GPU, NCCL over loopback sockets, ZeRO-1 " + ("LoRA" if sys.argv[5] == "1" else "full"),
                  "extra": sys.argv[4],
                  "median_step_s": round(statistics.median(r["step_seconds"] for r in steps[2:] or steps), 3) if steps else None,
                  "losses": [r["loss"] for r in steps], "device_phases_ms": phases}))
PY
done
