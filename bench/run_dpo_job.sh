#!/usr/bin/env bash
# Preference tuning on the GPU machine, in one call: `surogate dpo` against TRL's DPOTrainer
# (+ PEFT, and + Liger-Kernel's fused DPO loss when its wheel is carried) on the same HF model
# folder (random bf16 weights, the real Qwen3 tokenizer: bench/cli/make_hf_model.py) and the same
# pairs (bench/preference/make_pairs.py: prompt 512 + completion 512 tokens per side).
# Both: the sigmoid DPO loss (beta 0.1), max_length 1024 (a pair is 2 × 1024 tokens), 4 pairs per
# micro-batch, 2 micro-batches per step, AdamW, bf16, recomputation / gradient checkpointing off.
# The reference: ours is computed once before the first step over the whole set (the startup
# record's "reference" phase); TRL's runs inside every step (LoRA: adapter off; full: a frozen
# copy). "pairs/s with reference" charges ours the reference pass of the pairs the steps trained.
# Here, first: BUILD_DIR=build CARRY_DIR=carry/dpo CARRY_BINARIES=surogate scripts/gpu_check.sh
# --prepare, the peer wheels in carry/wheels (trl, datasets, dill, multiprocess, liger_kernel);
# there: `CARRY_DIR=$PWD/carry/dpo bash bench/run_dpo_job.sh` with carry ["carry/dpo.tar.xz",
# "carry/wheels"].
# Env: DPO_RUNS (qwen3-8b:lora qwen3-1.7b:full; model:mode:recipe runs ours with that `recipe`), DPO_STEPS (6: the first 2 are not timed),
# DPO_PAIRS (256), PEERS=0, LIGER=0 (LIGER=only: the Liger peer alone, the stronger one). Records: $OUT/dpo.jsonl (ours) and $OUT/peers.jsonl.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
source "$root/bench/mode_yaml.sh"
use_carry dpo surogate || exit 1
log="${OUT:-/tmp/dpo_job}"
work="${DPO_WORK:-/tmp/dpo_work}"
mkdir -p "$log" "$work"
surogate="$CARRY_DIR/surogate"
steps="${DPO_STEPS:-6}"
# The set (and so the reference pass) holds DPO_PAIRS pairs (256), at least the steps' pairs + 16:
# over a set this size the reference pass's first launches weigh on its rate as little as on a
# real dataset's (over 64 pairs they made a third of it, 2026-11-30).
pairs=${DPO_PAIRS:-256}
(( pairs < 8 * steps + 16 )) && pairs=$((8 * steps + 16))
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
install_peer_wheels /tmp/dpo_peers
gpu_index="${CUDA_VISIBLE_DEVICES:-0}"
gpu_index="${gpu_index%%,*}"
status=0
for run in ${DPO_RUNS:-qwen3-8b:lora qwen3-1.7b:full}; do
  # model:mode[:recipe]: the recipe is ours alone (the peers run bf16).
  model="${run%%:*}" rest="${run#*:}"
  mode="${rest%%:*}" recipe=""
  [[ "$rest" == *:* ]] && recipe="${rest#*:}"
  dir="$work/$model"
  [[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" || { status=1; continue; }
  data="$work/$model-pairs.jsonl"
  [[ -f "$data" ]] || python3 "$root/bench/preference/make_pairs.py" "$data" "$dir" "$pairs" 512 512 || { status=1; continue; }
  out="$work/out-$model-$mode"
  rm -rf "$out"
  cat >"$work/$model-$mode.yaml" <<YAML
model: $dir
output_dir: $out
log_file: $out/log.jsonl
datasets:
  - path: $data
    type: preference
use_chat_template: false
sequence_len: 2048
max_length: 1024
per_device_train_batch_size: 4
gradient_accumulation_steps: 2
max_steps: $steps
save_steps: 1000
optimizer: adamw
learning_rate: 1e-5
loss:
  type: dpo
  dpo_beta: 0.1
YAML
  append_mode_yaml "$mode" "$work/$model-$mode.yaml"
  [[ -n "$recipe" ]] && echo "recipe: $recipe" >>"$work/$model-$mode.yaml"
  "$surogate" dpo "$work/$model-$mode.yaml" --dry-run >"$work/dryrun.txt" 2>&1 || echo "$model $mode: dry run failed"
  nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" 2>/dev/null &
  sampler=$!
  "$surogate" dpo "$work/$model-$mode.yaml" >"$log/$model-$mode.log" 2>&1 || { echo "$model $mode: exit $?"; status=1; }
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  python3 - "$out/log.jsonl" "$model" "$mode" "$work/mem.txt" "$pairs" "$work/dryrun.txt" "${recipe:-bf16}" <<'PY' | tee -a "$log/dpo.jsonl"
import json, re, statistics, sys
path, model, mode, mem_path, dataset_pairs = sys.argv[1:6]
recipe = sys.argv[7]
records = [json.loads(l) for l in open(path) if l.startswith("{")]
steps = [r for r in records if r.get("type") == "step" or ("step_seconds" in r and "step" in r and "loss" in r)]
startup = next((r for r in records if "total_seconds" in r), {})
timed = [r["step_seconds"] for r in steps[2:]] or [r["step_seconds"] for r in steps]
step_s = statistics.median(timed) if timed else float("nan")
pairs_per_step = 8
reference_s = float(startup.get("reference", 0.0))
trained = pairs_per_step * len(timed)
with_reference = trained / (step_s * len(timed) + reference_s * trained / int(dataset_pairs)) if timed else 0.0
mem = [float(x) for x in open(mem_path).read().split() if x.replace(".", "").isdigit()]
predicted = re.search(r"predicted peak\s+([0-9.]+) GiB", open(sys.argv[6]).read())
print(json.dumps({"engine": "surogate dpo", "model": model, "mode": mode, "recipe": recipe, "pairs_per_s": pairs_per_step / step_s,
                  "pairs_per_s_with_reference": with_reference, "step_s": step_s,
                  "tokens_per_s": statistics.median([r["tokens_per_second"] for r in steps[2:]]) if len(steps) > 2 else None,
                  "reference_pass_s": reference_s, "reference_pairs": int(dataset_pairs),
                  "peak_mem_gib": max(mem, default=0) / 1024,
                  "predicted_peak_gib": float(predicted.group(1)) if predicted else None,
                  "losses": [r.get("loss") for r in steps],
                  "metrics": {k: v for k, v in (steps[-1] if steps else {}).items() if "/" in k},
                  "startup": startup}))
PY
  # The peers run bf16 whatever our recipe: once per model and mode, beside the entry without one.
  if [[ "${PEERS:-1}" != 0 && -z "$recipe" ]]; then
    for liger in "" --liger; do
      [[ -n "$liger" ]] && { [[ "${LIGER:-1}" != 0 ]] && python3 -c "import liger_kernel" 2>/dev/null || continue; }
      [[ -z "$liger" && "${LIGER:-1}" == only ]] && continue
      nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" 2>/dev/null &
      sampler=$!
      line=$(python3 "$root/bench/peers/trl_dpo_bench.py" --model-dir "$dir" --data "$data" --mode "$mode" $liger 2>>"$log/peers.log" | tail -1)
      if [[ "$line" == *OutOfMemory* ]]; then
        line=$(python3 "$root/bench/peers/trl_dpo_bench.py" --model-dir "$dir" --data "$data" --mode "$mode" $liger \
          --checkpointing 2>>"$log/peers.log" | tail -1)
      fi
      kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
      # peak_mem_gib: torch's max_memory_allocated; peak_mem_gib_smi: nvidia-smi's, as ours is measured.
      echo "$line" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['model']='$model'
mem=[float(x) for x in open('$work/mem.txt').read().split() if x.replace('.','').isdigit()]
r['peak_mem_gib_smi']=max(mem, default=0)/1024; print(json.dumps(r))" | tee -a "$log/peers.jsonl"
    done
  fi
  rm -rf "$out"
done
python3 - "$log" <<'PY'
import json, os, sys
def load(name):
    path = os.path.join(sys.argv[1], name)
    return [json.loads(l) for l in open(path) if l.startswith("{")] if os.path.exists(path) else []
ours, peers = load("dpo.jsonl"), load("peers.jsonl")
print("| model | mode | surogate pairs/s | with reference | tok/s | peak GiB | peer | peer pairs/s | peer peak GiB | ratio (with reference) |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
for r in ours:
    best = max((p for p in peers if p.get("model") == r["model"] and p.get("mode") == r["mode"] and "pairs_per_s" in p),
               key=lambda p: p["pairs_per_s"], default=None)
    peer = (f"{best['engine']} | {best['pairs_per_s']:.2f} | {best.get('peak_mem_gib_smi', best['peak_mem_gib']):.1f} | "
            f"{r['pairs_per_s'] / best['pairs_per_s']:.2f}x ({r['pairs_per_s_with_reference'] / best['pairs_per_s']:.2f}x) |"
            if best else "— | — | — | — |")
    print(f"| {r['model']} | {r['mode']} | {r['pairs_per_s']:.2f} | {r['pairs_per_s_with_reference']:.2f} | "
          f"{r['tokens_per_s'] or 0:.0f} | {r['peak_mem_gib']:.1f} | " + peer)
PY
exit $status
