#!/usr/bin/env bash
# Surogate on a GPU that offers less memory than it has: a torch process holds HOLD_GIB (default
# 60) while `surogate pt` trains MODEL (bench/models.py; QLoRA NF4 with lmhead_chunks: 8 by default,
# or the YAML lines in EXTRA_YAML), so the planner recomputes as a smaller GPU needs. Prints the
# dry run's prediction, the steps, the peak (nvidia-smi's less what the holder took) and tokens/s.
#   CARRY_DIR=$PWD/carry/cli HOLD_GIB=60 bash bench/run_with_memory_held.sh qwen3-14b
# HOLD_TO_MIB=81559 holds whatever makes the GPU offer what an H100 80GB has (none on an H100);
# MAX_STEPS (6); the GPU is the first of CUDA_VISIBLE_DEVICES (0).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cli surogate || exit 1
model="${1:-qwen3-14b}" work="${CLI_WORK:-/tmp/held_work}" out="${OUT:-/tmp/held_out}"
mkdir -p "$work" "$out"
gpu="${CUDA_VISIBLE_DEVICES:-0}"
gpu="${gpu%%,*}"
if [[ -n "${HOLD_TO_MIB:-}" ]]; then
  total=$(nvidia-smi -i "$gpu" --query-gpu=memory.total --format=csv,noheader,nounits)
  HOLD_GIB=$(python3 -c "print(max(0.0, ($total - ${HOLD_TO_MIB}) / 1024))")
  echo "GPU $gpu has $total MiB: holding $HOLD_GIB GiB so that it offers ${HOLD_TO_MIB} MiB"
fi
[[ -f "$work/$model/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$work/$model" >/dev/null || exit 1
[[ -f "$work/text.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text.jsonl" 2000 50 600
printf "model: %s\noutput_dir: %s/o\nlog_file: %s/o/log.jsonl\ndatasets:\n  - path: %s/text.jsonl\n    type: text\nsequence_len: 2048\nmax_steps: ${MAX_STEPS:-6}\nsave_steps: 1000\n%b\n" \
  "$work/$model" "$work" "$work" "$work" "${EXTRA_YAML:-qlora_bnb: true\nlmhead_chunks: 8}" >"$work/job.yaml"
rm -f "$work/held.ready"
python3 -c "
import time, torch
held = torch.empty(int(${HOLD_GIB:-60} * 2**30), dtype=torch.uint8, device='cuda')
open('$work/held.ready', 'w').close()
time.sleep(900)" &
holder=$!
while [[ ! -f "$work/held.ready" ]]; do sleep 1; done
base=$(nvidia-smi -i "$gpu" --query-gpu=memory.used --format=csv,noheader,nounits)
echo "the holder takes $base MiB"
"$CARRY_DIR/surogate" pt "$work/job.yaml" --dry-run 2>&1 | grep -E "predicted peak|recompute:"
nvidia-smi -i "$gpu" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" &
sampler=$!
"$CARRY_DIR/surogate" pt "$work/job.yaml" >"$out/run.log" 2>&1
echo "surogate exit $?"
kill "$sampler" "$holder"
grep -E "step [0-9]+/" "$out/run.log" | tail -3
peak=$(sort -n "$work/mem.txt" | tail -1)
echo "surogate peak: $((peak - base)) MiB (nvidia-smi $peak MiB less the holder's $base MiB)"
python3 -c "
import json, statistics
steps = [json.loads(l) for l in open('$work/o/log.jsonl') if '\"step\"' in l and 'tokens_per_second' in l]
print('tokens/s, median of steps 3..:', round(statistics.median([s['tokens_per_second'] for s in steps[2:]])))"
