#!/usr/bin/env bash
# GRPO on the GPU machine, in one call: `surogate grpo` against TRL's GRPOTrainer (+ PEFT, its own
# transformers generation: vLLM cannot be carried) on the same HF model folder (random bf16
# weights, the real Qwen3 tokenizer: bench/cli/make_hf_model.py), the same prompts
# (bench/grpo/make_prompts.py: arithmetic questions with an `answer` column) and the same rewards
# (bench/grpo/rewards.py: an exact-answer and a format reward, Python functions on both sides).
# Both: LoRA rank 16 (alpha 32, all linear layers), 8 generations of every prompt, 512 completion
# tokens, 64 prompts per step (GRPO_MICRO × GRPO_ACCUM = 16 × 32 = 512 completions), temperature
# 1, top_p 1, top_k 0, beta 0, loss_type dapo, one policy update per generation batch, AdamW, bf16,
# recomputation / gradient checkpointing off (TRL retried with it after an out-of-memory).
# Same tokens on both sides: every completion runs to max_completion_length. The folder's
# generation_config.json names as EOS the id vocab_size, which no model emits, so surogate never
# stops early; TRL gets transformers' min_new_tokens = max_completion_length (its logits
# processor masks the EOS until then). The records carry the mean completion length to show it.
# Timing: the steps after the first GRPO_WARMUP (1); completions/s = completions per step × timed
# steps / their seconds; the split: surogate's step records (generation_seconds, reward_seconds,
# training_seconds: docs/grpo.md#records), TRL's by wrapping its _generate / _calculate_rewards.
# Peak memory: nvidia-smi sampled every 200 ms (both; the first visible GPU), and torch's max_memory_allocated (TRL).
# Here, first: BUILD_DIR=build CARRY_DIR=carry/grpo CARRY_BINARIES=surogate scripts/gpu_check.sh
# --prepare, the peer wheels in carry/wheels (trl, datasets, dill, multiprocess, ...); there:
# `CARRY_DIR=$PWD/carry/grpo bash bench/run_grpo_job.sh` with carry ["carry/grpo.tar.xz",
# "carry/wheels"].
# Env: GRPO_RUNS (qwen3-1.7b:lora qwen3-8b:lora; MODEL:MODE[:RECIPE], e.g. qwen3-8b:lora:fp8_hybrid
# runs ours with that `recipe`, the peer as ever in bf16), GRPO_STEPS (4, GRPO_WARMUP 1 of them not timed),
# GRPO_GENERATIONS (8), GRPO_COMPLETION (512), GRPO_MICRO (16), GRPO_ACCUM (32), PEERS=0,
# GRPO_GENERATION_BATCH (surogate's grpo.generation_batch_size: completions generated at once;
# unset: 64), GRPO_GPUS (surogate's gpus: data-parallel ranks, each sampling and training
# GRPO_MICRO × GRPO_ACCUM completions a step; unset: one GPU; the peer stays on one),
# GRPO_DEVICE=cpu (the CPU smoke test: no nvidia-smi, TRL in fp32; SUROGATE_BIN names the binary).
# Records: $OUT/grpo.jsonl (ours), $OUT/peers.jsonl, and a table with the ratios on stdout.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
device="${GRPO_DEVICE:-cuda}"
source "$root/bench/carry_env.sh"
source "$root/bench/mode_yaml.sh"
if [[ -n "${SUROGATE_BIN:-}" ]]; then
  surogate="$SUROGATE_BIN"
else
  use_carry grpo surogate || exit 1
  surogate="$CARRY_DIR/surogate"
fi
log="${OUT:-/tmp/grpo_job}"
work="${GRPO_WORK:-/tmp/grpo_work}"
mkdir -p "$log" "$work"
steps="${GRPO_STEPS:-4}" warmup="${GRPO_WARMUP:-1}"
generations="${GRPO_GENERATIONS:-8}" completion="${GRPO_COMPLETION:-512}"
micro="${GRPO_MICRO:-16}" accum="${GRPO_ACCUM:-32}"
per_step=$((micro * accum))
generation_batch=""
[[ -n "${GRPO_GENERATION_BATCH:-}" ]] && generation_batch="  generation_batch_size: $GRPO_GENERATION_BATCH"
gpus="${GRPO_GPUS:-1}" gpus_line=""
[[ -n "${GRPO_GPUS:-}" ]] && gpus_line="gpus: $GRPO_GPUS"
prompts=$((per_step * gpus / generations * steps + 64))
if [[ "$device" == cuda ]]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  install_peer_wheels /tmp/grpo_peers
fi
source "$root/bench/memory_sampler.sh"  # start_sampler FILE, stop_sampler (the GPU only)
cp "$root/bench/grpo/rewards.py" "$work/rewards.py"
data="$work/prompts.jsonl"
python3 "$root/bench/grpo/make_prompts.py" "$data" "$prompts" || exit 1
status=0
for run in ${GRPO_RUNS:-qwen3-1.7b:lora qwen3-8b:lora}; do
  model="${run%%:*}" rest="${run#*:}"
  mode="${rest%%:*}" recipe=""
  [[ "$rest" == *:* ]] && recipe="${rest#*:}"
  dir="$work/$model"
  [[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" || { status=1; continue; }
  # The EOS no model emits (see the top): every completion runs to max_completion_length.
  python3 -c "import json, sys; v = json.load(open(sys.argv[1] + '/config.json'))['vocab_size']
json.dump({'eos_token_id': v}, open(sys.argv[1] + '/generation_config.json', 'w'))" "$dir"
  out="$work/out-$model-$mode"
  rm -rf "$out"
  yaml="$work/$model-$mode.yaml"
  cat >"$yaml" <<YAML
model: $dir
output_dir: $out
log_file: $out/log.jsonl
use_chat_template: false
datasets:
  - path: $data
    type: prompt
grpo:
  num_generations: $generations
  max_prompt_length: 64
  max_completion_length: $completion
  temperature: 1.0
  top_p: 1.0
  top_k: 0
  beta: 0.0
  loss_type: dapo
  reward_functions: ["rewards.py:correct_answer", "rewards.py:boxed_format"]
$generation_batch
per_device_train_batch_size: $micro
gradient_accumulation_steps: $accum
max_steps: $steps
$gpus_line
save_steps: 1000
optimizer: adamw
learning_rate: 1e-5
YAML
  append_mode_yaml "$mode" "$yaml"
  [[ -n "$recipe" ]] && echo "recipe: $recipe" >>"$yaml"
  "$surogate" grpo "$yaml" --dry-run >"$work/dryrun.txt" 2>&1 || echo "$model $mode: dry run failed"
  start_sampler "$work/mem.txt"
  "$surogate" grpo "$yaml" >"$log/$model-$mode.log" 2>&1 || { echo "$model $mode: exit $?"; tail -5 "$log/$model-$mode.log"; status=1; }
  stop_sampler
  python3 "$root/bench/grpo/surogate_record.py" "$out/log.jsonl" --model "$model" --mode "$mode" --recipe "${recipe:-bf16}" --warmup "$warmup" \
    --completions-per-step $((per_step * gpus)) --gpus "$gpus" --memory "$work/mem.txt" \
    --output "$log/$model-$mode.log" --dry-run "$work/dryrun.txt" | tee -a "$log/grpo.jsonl"
  if [[ "${PEERS:-1}" != 0 ]]; then
    peer=(python3 "$root/bench/peers/trl_grpo_bench.py" --model-dir "$dir" --data "$data" --rewards "$work/rewards.py"
          --mode "$mode" --device "$device" --num-generations "$generations" --max-completion-length "$completion"
          --micro-batch "$micro" --grad-accum "$accum" --steps $((steps - warmup)) --warmup "$warmup" --full-length)
    start_sampler "$work/mem.txt"
    line=$("${peer[@]}" 2>>"$log/peers.log" | tail -1)
    stop_sampler
    if [[ "$line" == *OutOfMemory* ]]; then
      start_sampler "$work/mem.txt"
      line=$("${peer[@]}" --checkpointing 2>>"$log/peers.log" | tail -1)
      stop_sampler
    fi
    # peak_mem_gib: torch's max_memory_allocated; peak_mem_gib_smi: nvidia-smi's, as ours is measured.
    echo "$line" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['model']='$model'
mem=[float(x) for x in open('$work/mem.txt').read().split() if x.replace('.','').isdigit()]
r['peak_mem_gib_smi']=max(mem, default=0)/1024 if mem else None; print(json.dumps(r))" | tee -a "$log/peers.jsonl"
  fi
  rm -rf "$out"
done
python3 "$root/bench/grpo/surogate_record.py" --table "$log/grpo.jsonl" "$log/peers.jsonl"
exit $status
