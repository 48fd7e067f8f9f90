#!/usr/bin/env bash
# Vision-language LoRA on the GPU machine, in one call (issue 41's Speed section): `surogate sft`
# against transformers + PEFT on the same HF folder and the same image–caption rows, for
# Qwen2.5-VL-7B and Qwen3-VL-8B shapes.
# - The folders (bench/vision/make_vl_model.py): transformers' config classes at the real shapes,
#   random bf16 weights written by save_pretrained, the real Qwen tokenizer with the Qwen2-VL chat
#   template that has the vision tokens, the real folders' preprocessor_config.json.
# - The rows (bench/vision/make_vl_data.py): VL_ROWS chat rows (content parts, docs/vision.md),
#   one image each, PNG / JPEG of mixed sizes from 224 × 224 to 1600 × 1200, captions of 30–120
#   words. Both sides resize under max_pixels 1003520 (1280 × 28 × 28: at most 1280 merged image
#   tokens on Qwen2.5-VL's patch 14, 980 on Qwen3-VL's patch 16).
# - Surogate: `surogate sft`, LoRA r16 (alpha 32, dropout 0, the text model's linear layers; the
#   tower frozen), recompute off, AdamW, sequence_len 2048 (an image of 1280 tokens and its caption
#   fit), packed rows (the default), micro-batch 2 × accumulation 4 as the other jobs; `surogate
#   tokenize` first (its report gives the tokens per image row), `--dry-run` (predicted peak, the
#   tower's planned patches). tokens/s: the median of the steps' real tokens/s after the first
#   VL_WARMUP; images/s: tokens/s over the split's tokens per image row (every row holds one image);
#   peak memory: nvidia-smi sampled every 200 ms.
# - The peer (bench/vision/hf_vl_peft_bench.py): the model class of config.json + PEFT LoRA r16 on
#   the same text projections, the tower frozen, bf16, flash-attention 2 when importable else SDPA,
#   fused AdamW; the same rows formatted by transformers' image processor and chat template before
#   the timed steps, VL_PEER_MICRO rows a micro-batch padded to the longest, VL_PEER_ACCUM of them a
#   step; tokens/s (real tokens) and images/s counted exactly; peak memory: torch's
#   max_memory_allocated and nvidia-smi's. An out-of-memory retries with gradient checkpointing.
# Records: $OUT/vl.jsonl (ours, with the peer's rates and the ratios), $OUT/peers.jsonl, the
# table on stdout. The headline rows are added by hand (bench/headline_rows.py).
# On the GPU machine, with the CLI carried as carry/cli (scripts/gpu_check.sh --prepare):
#   CARRY_DIR=$PWD/carry/cli bash bench/run_vl_job.sh
# Env: VL_RUNS (qwen2.5-vl-7b qwen3-vl-8b), VL_STEPS (8: VL_WARMUP 2 of them not timed),
# VL_ROWS (rows in the set; 32 × VL_STEPS: more than the steps take, so no step runs an epoch's
# padded last batch), VL_MAX_PIXELS (1003520), VL_SEQ (2048), VL_MICRO (2), VL_ACCUM (4),
# VL_PEER_MICRO (4), VL_PEER_ACCUM (4), VL_PEER_STEPS (3, after 1 untimed), PEERS=0 (no peer),
# SUROGATE_BIN (the binary; else $CARRY_DIR/surogate), VL_WORK (/tmp/vl_work).
# VL_TINY=1: the CPU smoke test of the whole job: tiny folders of both families (patch 4),
# images a tenth of the size, max_pixels 16384, sequence_len 512, 16 rows, 3 steps, both sides on
# the CPU (the peer in fp32), no nvidia-smi; tests/python/test_vl_bench.py runs it. Here:
#   VL_TINY=1 SUROGATE_BIN=$PWD/build/surogate bash bench/run_vl_job.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tiny="${VL_TINY:-0}"
if [[ -n "${SUROGATE_BIN:-}" ]]; then
  surogate="$SUROGATE_BIN"
else
  source "$root/bench/carry_env.sh"
  use_carry cli surogate || exit 1
  surogate="$CARRY_DIR/surogate"
fi
log="${OUT:-/tmp/vl_job}"
work="${VL_WORK:-/tmp/vl_work}"
mkdir -p "$log" "$work"
steps="${VL_STEPS:-8}" warmup="${VL_WARMUP:-2}"
micro="${VL_MICRO:-2}" accum="${VL_ACCUM:-4}"
peer_micro="${VL_PEER_MICRO:-4}" peer_accum="${VL_PEER_ACCUM:-4}" peer_steps="${VL_PEER_STEPS:-3}"
if [[ "$tiny" == 1 ]]; then
  device=cpu max_pixels="${VL_MAX_PIXELS:-16384}" seq="${VL_SEQ:-512}" scale=0.1
  steps="${VL_STEPS:-3}" warmup="${VL_WARMUP:-1}" accum="${VL_ACCUM:-2}"
  peer_micro="${VL_PEER_MICRO:-2}" peer_accum="${VL_PEER_ACCUM:-2}" peer_steps="${VL_PEER_STEPS:-1}"
  rows="${VL_ROWS:-16}"
  export CUDA_VISIBLE_DEVICES=""
  gpu=cpu
else
  device=cuda max_pixels="${VL_MAX_PIXELS:-1003520}" seq="${VL_SEQ:-2048}" scale=1
  rows="${VL_ROWS:-$((32 * steps))}"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
source "$root/bench/memory_sampler.sh"  # start_sampler FILE, stop_sampler (the GPU only)
source "$root/bench/mode_yaml.sh"       # append_mode_yaml MODE FILE

data="$work/data-$scale-$rows/rows.jsonl"
[[ -f "$data" ]] || python3 "$root/bench/vision/make_vl_data.py" "$(dirname "$data")" "$rows" --scale "$scale" || exit 1
status=0
for model in ${VL_RUNS:-qwen2.5-vl-7b qwen3-vl-8b}; do
  [[ "$tiny" == 1 ]] && model="${model%-*}-tiny"  # qwen2.5-vl-7b -> qwen2.5-vl-tiny
  dir="$work/$model"
  # preprocessor_config.json is the folder's last file: a folder without it was cut short.
  [[ -f "$dir/preprocessor_config.json" ]] || python3 "$root/bench/vision/make_vl_model.py" "$model" "$dir" ||
    { status=1; continue; }
  out="$work/out-$model"
  rm -rf "$out"
  yaml="$work/$model.yaml"
  cat >"$yaml" <<YAML
model: $dir
output_dir: $out
log_file: $out/log.jsonl
datasets:
  - path: $data
    type: conversation
max_pixels: $max_pixels
sequence_len: $seq
validation_split_ratio: 0
per_device_train_batch_size: $micro
gradient_accumulation_steps: $accum
max_steps: $steps
save_steps: 1000
optimizer: adamw
learning_rate: 1e-4
warmup_steps: 0
YAML
  append_mode_yaml lora "$yaml"
  # The token cache first: its report gives the split's tokens per image row; the run reuses it.
  "$surogate" tokenize "$yaml" >"$work/tokenize.txt" 2>&1 ||
    { echo "$model: tokenize failed"; tail -5 "$work/tokenize.txt"; }
  "$surogate" sft "$yaml" --dry-run >"$work/dryrun.txt" 2>&1 || echo "$model: dry run failed"
  start_sampler "$work/mem.txt"
  "$surogate" sft "$yaml" >"$log/$model.log" 2>&1 || { echo "$model: exit $?"; tail -5 "$log/$model.log"; status=1; }
  stop_sampler
  settings="{\"max_pixels\": $max_pixels, \"sequence_len\": $seq, \"micro_batch\": $micro, \"grad_accum\": $accum,
    \"lora_rank\": 16, \"dataset_rows\": $rows}"
  python3 "$root/bench/vision/vl_records.py" surogate "$out/log.jsonl" --model "$model" --warmup "$warmup" \
    --tokenize-output "$work/tokenize.txt" --dry-run "$work/dryrun.txt" --memory "$work/mem.txt" --gpu "$gpu" \
    --settings "$settings" >"$work/ours-$model.json" || status=1
  if [[ "${PEERS:-1}" != 0 ]]; then
    peer=(python3 "$root/bench/vision/hf_vl_peft_bench.py" --model-dir "$dir" --model-name "$model" --data "$data"
          --max-pixels "$max_pixels" --device "$device" --micro-batch "$peer_micro" --grad-accum "$peer_accum"
          --steps "$peer_steps" --warmup 1)
    start_sampler "$work/mem.txt"
    line=$("${peer[@]}" 2>>"$log/peers.log" | tail -1)
    stop_sampler
    if [[ "$line" == *OutOfMemory* ]]; then
      start_sampler "$work/mem.txt"
      line=$("${peer[@]}" --checkpointing 2>>"$log/peers.log" | tail -1)
      stop_sampler
    fi
    echo "$line" | python3 "$root/bench/vision/vl_records.py" peer --model "$model" --memory "$work/mem.txt" |
      tee -a "$log/peers.jsonl"
  fi
  python3 "$root/bench/vision/vl_records.py" combine "$work/ours-$model.json" "$log/peers.jsonl" |
    tee -a "$log/vl.jsonl"
  rm -rf "$out"
done
python3 "$root/bench/vision/vl_records.py" table "$log/vl.jsonl" "$log/peers.jsonl"
exit $status
