#!/usr/bin/env bash
# The sequence- and pipeline-parallel rows of the multi-GPU command (issue 25), run by
# bench/run_multi_gpu.sh with MP=1 (or alone, with the same carry and environment). Rows, each a
# JSON record in $OUT/model_parallel.jsonl and a table at the end:
#   1. longest context: for Qwen3-8B LoRA (random weights, bench/cli/make_hf_model.py) on 1, 2 and 4
#      GPUs (capped at the visible ones) with sequence_parallel_size = GPUs, the dry run's
#      prediction for each sequence_len of MP_SEQUENCES (per-GPU peak, fits or not, the layout the
#      engine would pick), refined by bisection to MP_CONTEXT_STEP (4096) tokens; then 3 steps of
#      `surogate pt` at the longest that fits (packed short documents: the memory of one long
#      document, not its attention time): tokens/s and the nvidia-smi peak; then tokens/s at
#      MP_CONTEXT_RATE_SEQUENCE (32768) over long documents cut into whole rows (truncation_strategy:
#      split), and on the most GPUs also at MP_CONTEXT_LONG_SEQUENCE (unset: not run).
#      Goal: the longest length ≥ 1.9× per doubling of the GPUs; tokens/s at 32k.
#   2. bf16 equivalence: Qwen3-0.6B full fine-tuning, 6 steps, 2 sequence ranks and 2 stages against
#      one GPU with the same global batch: the largest relative per-step loss difference.
#   3. pipeline bubble: Qwen3-1.7B full on 2 and 4 stages with gradient_accumulation_steps 1, 4 and
#      8: tokens/s against the 1F1B theory, one GPU's tokens/s × GPUs × M / (M + P − 1) (and its
#      forward run twice on every stage but the last, docs/architecture.md).
#   4. beyond one GPU: Qwen3-14B (MP_BEYOND_MODEL) full fine-tuning, pipeline on every visible GPU against ZeRO-3
#      (zero_level: 3) on the same GPUs: tokens/s and peak memory per GPU.
#   5. (MP_PEERS=1) the long-context peer: transformers + PEFT with torch context parallelism on the
#      same GPU counts (bench/peers/hf_context_parallel.py, MP_STEPS steps as ours), tokens/s at MP_CONTEXT_RATE_SEQUENCE and,
#      on the most GPUs, at MP_PEER_LONG_SEQUENCES (comma-separated; each run capped by MP_PEER_TIMEOUT, 300 s).
# A run this build refuses (ZeRO-3 until it lands) is
# recorded as {"refused": "<the error>"} rather than failing the command, so the rows show what this
# build can do; the dry-run predictions run in every build.
# tokens/s: tokens over seconds of the steps after the first (each step's own in step_tokens_per_s).
# Each run's output is kept as $OUT/run-<row>.txt; a run past MP_RUN_TIMEOUT (300 s) is recorded as failed,
# with every thread's backtrace in $OUT/stall-<row>.txt (bench/watchdog.sh).
# Env: MP_SEQUENCES ("8192 16384 32768 65536 131072"), MP_GPUS ("1 2 4"), MP_STAGES (the bubble row's
# stage counts, "1 2 4"), MP_MICRO (its micro-batch counts, "1 4 8"; one stage always runs M = 1,
# the theory's baseline), MP_STEPS (3), SKIP_MP_* =1 for a row
# (SKIP_MP_CONTEXT, SKIP_MP_EQUIVALENCE, SKIP_MP_BUBBLE, SKIP_MP_BEYOND), MP_CONTEXT_OPTIONS (YAML lines
# added to the context row's runs, e.g. "lmhead_chunks: 16"; unset: the reference's defaults),
# MP_CONTEXT_LAYOUT (sequence: sequence_parallel_size = GPUs, the default; data: 1, so each GPU
# trains its own rows, as `gpus: N` does by default: the 128k goal's data-parallel figure).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
source "$root/bench/watchdog.sh"
use_carry dp surogate || exit 1
log="${OUT:-/tmp/multi_gpu}"
work="${DP_WORK:-/tmp/multi_gpu_work}"
mkdir -p "$log" "$work"
surogate="$CARRY_DIR/surogate"
steps="${MP_STEPS:-3}"
visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
records="$log/model_parallel.jsonl"
[[ -f "$work/text.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text.jsonl" 2000 50 600

model_dir() {  # name → folder with config.json and random weights
  local dir="$work/$1"
  [[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$1" "$dir" >/dev/null || return 1
  echo "$dir"
}

yaml() {  # model out name sequence_len gpus extra...
  local model=$1 out=$2 name=$3 sequence=$4 gpus=$5
  shift 5
  printf 'model: %s\noutput_dir: %s\nlog_file: %s/log-%s.jsonl\ndatasets:\n  - path: %s\n    type: text\n' \
    "$model" "$out" "$out" "$name" "$work/text.jsonl"
  printf 'sequence_len: %s\nper_device_train_batch_size: 1\noptimizer: adamw_8bit\nmax_steps: %s\nsave_steps: 1000\n' \
    "$sequence" "$steps"
  printf 'lora_dropout: 0.0\ngpus: %s\neval_steps: 1000\nvalidation_split_ratio: 0.0\n' "$gpus"
  for line in "$@"; do printf '%s\n' "$line"; done
}

# Runs `surogate pt FILE` with the memory sampler; prints one JSON record (row fields in $2).
run_row() {  # yaml_file json_fields gpus
  local file=$1 fields=$2 gpus=$3 out
  out=$(grep '^output_dir:' "$file" | cut -d' ' -f2)
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" 2>/dev/null &
  local sampler=$!
  run_watched "${MP_RUN_TIMEOUT:-300}" "$log/stall-$(basename "$file" .yaml).txt" "$surogate" pt "$file" >"$work/run.txt" 2>&1
  local code=$?
  cp "$work/run.txt" "$log/run-$(basename "$file" .yaml).txt"  # kept: a run that fails or stalls says why
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  python3 - "$out" "$fields" "$gpus" "$code" "$work/run.txt" "$work/mem.txt" <<'PY'
import glob, json, sys
out, fields, gpus, code, run, mem = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
record = dict(fields, gpus=gpus)
rows = [json.loads(l) for f in glob.glob(out + "/log-*.jsonl") for l in open(f) if l.startswith("{")]
steps = [r for r in rows if r.get("type") == "step"]
if code != 0:
    lines = [l for l in open(run).read().splitlines() if l.strip()]
    reason = "timed out" if code == 124 else lines[-1] if lines else f"exit {code}"
    record["refused" if code == 2 else "failed"] = reason
if steps:  # also a run stopped after its steps (e.g. by the cap while it saved the final model)
    # Tokens over seconds of the steps after the first (its warm-up): a step whose rows are not full
    # (the packing's last row) counts as the time it took, as it does for the user.
    timed = steps[1:] or steps
    record["tokens_per_s"] = sum(r["tokens"] for r in timed) / max(sum(r["step_seconds"] for r in timed), 1e-9)
    record["step_tokens_per_s"] = [round(r["tokens_per_second"]) for r in steps]
    record["losses"] = [r["loss"] for r in steps]
elif code == 0:
    record["tokens_per_s"] = 0.0
peaks = {}
for line in open(mem):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[0]) < gpus:
        peaks[int(parts[0])] = max(peaks.get(int(parts[0]), 0), int(parts[1]))
record["peak_mem_gib_per_gpu"] = [round(peaks[i] / 1024, 2) for i in sorted(peaks)]
print(json.dumps(record))
PY
}

# 1. The longest context Qwen3-8B LoRA trains at with sequence parallelism on 1, 2, 4 GPUs.
predict() {  # yaml gpus sequence → one context-prediction record; exit 0 when the dry run says it fits
  "$surogate" pt "$1" --dry-run >"$work/dry.txt" 2>&1
  python3 - "$work/dry.txt" "$2" "$3" <<'PY' | tee -a "$records"
import json, re, sys
text, gpus, sequence = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
peak = re.search(r"predicted peak\s+([0-9.]+) (GiB|MiB).*: (fits|does NOT fit)", text)
pick = re.search(r"# the engine would pick (.*)", text)
print(json.dumps({"row": "context-prediction", "model": "qwen3-8b", "mode": "lora", "gpus": gpus, "sequence_len": sequence,
                  "predicted_peak_gib": float(peak.group(1)) / (1024 if peak.group(2) == "MiB" else 1) if peak else None,
                  "fits": bool(peak and peak.group(3) == "fits"),
                  "engine_pick": pick.group(1) if pick else None,
                  "error": None if peak else text.strip().splitlines()[-1] if text.strip() else "no output"}))
PY
  grep -q ': fits$' "$work/dry.txt"
}
context_yaml() {  # gpus sequence data → the row's configuration on stdout
  local name="context-g$1-s$2-$3" data="$work/text.jsonl" extra=()
  [[ $3 == long ]] && data="$work/long.jsonl" && extra=("truncation_strategy: split")
  [[ -n "${MP_CONTEXT_OPTIONS:-}" ]] && extra+=("${MP_CONTEXT_OPTIONS}")  # e.g. "lmhead_chunks: 16"
  local split=$1
  [[ "${MP_CONTEXT_LAYOUT:-sequence}" == data ]] && split=1  # each GPU its own rows
  yaml "$dir" "$work/out-$name" "$name" "$2" "$1" "sequence_parallel_size: $split" "gradient_accumulation_steps: 1" \
    ${extra[@]+"${extra[@]}"} | sed "s|$work/text.jsonl|$data|"
}
if [[ "${SKIP_MP_CONTEXT:-0}" != 1 ]] && dir=$(model_dir qwen3-8b); then
  printf '\n=== longest context (Qwen3-8B LoRA, sequence parallelism) ===\n'
  # Long documents (about 250k tokens each), cut into rows by truncation_strategy: split, so that
  # attention spans the whole row; the packed short documents of text.jsonl attend within each.
  [[ -f "$work/long.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/long.jsonl" 12 200000 200000
  most=0
  for gpus in ${MP_GPUS:-1 2 4}; do (( gpus <= visible && gpus > most )) && most=$gpus; done
  for gpus in ${MP_GPUS:-1 2 4}; do
    (( gpus > visible )) && continue
    longest=0 shortest_refused=0
    for sequence in ${MP_SEQUENCES:-8192 16384 32768 65536 131072}; do
      context_yaml "$gpus" "$sequence" packed >"$work/probe.yaml"
      if predict "$work/probe.yaml" "$gpus" "$sequence"; then longest=$sequence; else
        (( shortest_refused == 0 )) && shortest_refused=$sequence; fi
    done
    # Between the longest length that fits and the next that does not, to MP_CONTEXT_STEP tokens.
    while (( longest > 0 && shortest_refused > longest + ${MP_CONTEXT_STEP:-4096} )); do
      middle=$(( (longest + shortest_refused) / 2 / ${MP_CONTEXT_STEP:-4096} * ${MP_CONTEXT_STEP:-4096} ))
      context_yaml "$gpus" "$middle" packed >"$work/probe.yaml"
      if predict "$work/probe.yaml" "$gpus" "$middle" >/dev/null; then longest=$middle; else shortest_refused=$middle; fi
    done
    if (( longest > 0 )); then  # trains there: packed rows (the memory is the same as one document's)
      context_yaml "$gpus" "$longest" packed >"$work/context-g$gpus-longest.yaml"
      run_row "$work/context-g$gpus-longest.yaml" \
        "{\"row\": \"context-run\", \"model\": \"qwen3-8b\", \"sequence_len\": $longest, \"data\": \"packed\", \"layout\": \"${MP_CONTEXT_LAYOUT:-sequence}\", \"options\": \"${MP_CONTEXT_OPTIONS:-}\"}" "$gpus" |
        tee -a "$records"
    fi
    # Tokens/s at MP_CONTEXT_RATE_SEQUENCE (32k) and at MP_CONTEXT_LONG_SEQUENCE (on the most GPUs
    # only), over whole-row documents.
    lengths="${MP_CONTEXT_RATE_SEQUENCE:-32768}"
    (( gpus == most )) && lengths="$lengths ${MP_CONTEXT_LONG_SEQUENCE:-}"
    for sequence in $lengths; do
      context_yaml "$gpus" "$sequence" long >"$work/context-g$gpus-s$sequence-long.yaml"
      run_row "$work/context-g$gpus-s$sequence-long.yaml" \
        "{\"row\": \"context-run\", \"model\": \"qwen3-8b\", \"sequence_len\": $sequence, \"data\": \"long documents\", \"layout\": \"${MP_CONTEXT_LAYOUT:-sequence}\", \"options\": \"${MP_CONTEXT_OPTIONS:-}\"}" \
        "$gpus" | tee -a "$records"
    done
    rm -rf "$work"/out-context-*
  done
fi

# 2. bf16: 2 sequence ranks and 2 stages against one GPU with the same global batch (each layout
#    is one replica of 2 GPUs, so it takes the same 4 micro-batches a step).
if [[ "${SKIP_MP_EQUIVALENCE:-0}" != 1 ]] && (( visible >= 2 )) && dir=$(model_dir qwen3-0.6b); then
  printf '\n=== bf16 equivalence (Qwen3-0.6B full) ===\n'
  for layout in "1||gradient_accumulation_steps: 4" "2|sequence_parallel_size: 2|gradient_accumulation_steps: 4" \
                "2|pipeline_parallel_size: 2|gradient_accumulation_steps: 4"; do
    IFS='|' read -r gpus split accumulation <<<"$layout"
    name="equivalence-g$gpus-${split%%_*}"
    (steps=6; yaml "$dir" "$work/out-$name" "$name" 2048 "$gpus" "lora: false" "$accumulation" ${split:+"$split"}) \
      >"$work/$name.yaml"
    run_row "$work/$name.yaml" "{\"row\": \"equivalence\", \"model\": \"qwen3-0.6b\", \"layout\": \"${split:-one GPU}\"}" "$gpus" |
      tee -a "$records"
    rm -rf "$work/out-$name"
  done
fi

# 3. The pipeline's bubble against 1F1B's theory.
if [[ "${SKIP_MP_BUBBLE:-0}" != 1 ]] && (( visible >= 2 )) && dir=$(model_dir qwen3-1.7b); then
  printf '\n=== pipeline bubble (Qwen3-1.7B full) ===\n'
  for stages in ${MP_STAGES:-1 2 4}; do
    (( stages > visible )) && continue
    micros="${MP_MICRO:-1 4 8}"
    (( stages == 1 )) && micros=1  # the theory's baseline
    for micro in $micros; do
      name="bubble-p$stages-m$micro"
      split=""; (( stages > 1 )) && split="pipeline_parallel_size: $stages"
      yaml "$dir" "$work/out-$name" "$name" 2048 "$stages" "lora: false" "gradient_accumulation_steps: $micro" \
        ${split:+"$split"} >"$work/$name.yaml"
      run_row "$work/$name.yaml" "{\"row\": \"bubble\", \"model\": \"qwen3-1.7b\", \"stages\": $stages, \"micro_batches\": $micro}" \
        "$stages" | tee -a "$records"
      rm -rf "$work/out-$name"
    done
  done
fi

# 4. A model that does not fit one GPU: pipeline against ZeRO-3 on every visible GPU.
beyond="${MP_BEYOND_MODEL:-qwen3-14b}"
if [[ "${SKIP_MP_BEYOND:-0}" != 1 ]] && (( visible >= 2 )) && dir=$(model_dir "$beyond"); then
  printf '\n=== beyond one GPU (%s full) ===\n' "$beyond"
  for split in "pipeline_parallel_size: $visible" "zero_level: 3"; do
    name="beyond-${split%%:*}"
    yaml "$dir" "$work/out-$name" "$name" 2048 "$visible" "lora: false" "gradient_accumulation_steps: 8" "$split" \
      >"$work/$name.yaml"
    run_row "$work/$name.yaml" "{\"row\": \"beyond\", \"model\": \"$beyond\", \"layout\": \"$split\"}" "$visible" |
      tee -a "$records"
    rm -rf "$work/out-$name"
  done
fi

# 5. The long-context peer: transformers + PEFT with torch context parallelism (ring attention) on
#    the same GPU counts, Qwen3-8B LoRA, one long document per step (bench/peers/hf_context_parallel.py):
#    tokens/s at MP_CONTEXT_RATE_SEQUENCE (32k) and, on the most GPUs, MP_PEER_LONG_SEQUENCES.
if [[ "${MP_PEERS:-0}" == 1 ]] && dir=$(model_dir qwen3-8b); then
  printf '\n=== long-context peer (transformers + PEFT, torch context parallel) ===\n'
  most=0
  for gpus in ${MP_GPUS:-1 2 4}; do (( gpus <= visible && gpus > most )) && most=$gpus; done
  for gpus in ${MP_GPUS:-1 2 4}; do
    (( gpus > visible )) && continue
    lengths="${MP_CONTEXT_RATE_SEQUENCE:-32768}"
    (( gpus == most )) && [[ -n "${MP_PEER_LONG_SEQUENCES:-}" ]] && lengths="$lengths,${MP_PEER_LONG_SEQUENCES}"
    timeout "${MP_PEER_TIMEOUT:-300}" python3 -m torch.distributed.run --standalone --nproc_per_node "$gpus" \
      "$root/bench/peers/hf_context_parallel.py" --model "$dir" --sequences "${lengths// /}" --steps "$steps" \
      --time-limit "$(( ${MP_PEER_TIMEOUT:-300} - 20 ))" >"$log/peer-g$gpus.txt" 2>&1
    grep '^{' "$log/peer-g$gpus.txt" | python3 -c '
import json, sys
for line in sys.stdin:
    record = json.loads(line)
    record.update(row="context-peer", model="qwen3-8b")
    print(json.dumps(record))' | tee -a "$records"
  done
fi

python3 - "$records" <<'PY'
import json, os, sys
path = sys.argv[1]
rows = [json.loads(l) for l in open(path)] if os.path.exists(path) else []
def verdict(r):
    if "refused" in r: return "refused: " + r["refused"][:100]
    done = f"{r.get('tokens_per_s', 0):.0f} tok/s, peak {max(r.get('peak_mem_gib_per_gpu') or [0]):.1f} GiB/GPU"
    if "failed" in r: return ("after its steps, " + done + "; " if r.get("tokens_per_s") else "") + "failed: " + r["failed"][:100]
    return done
print("| row | model | GPUs | setting | result |")
print("| --- | --- | ---: | --- | --- |")
for r in rows:
    if r["row"] == "context-prediction":
        result = (f"predicted {r['predicted_peak_gib']:.1f} GiB/GPU, {'fits' if r['fits'] else 'does not fit'}; pick {r['engine_pick']}"
                  if r["predicted_peak_gib"] is not None else f"dry run: {r['error']}")
        print(f"| context (dry run) | {r['model']} | {r['gpus']} | seq {r['sequence_len']} | {result} |")
    elif r["row"] == "equivalence":
        print(f"| bf16 equivalence | {r['model']} | {r['gpus']} | {r['layout']} | {verdict(r)} |")
    elif r["row"] == "context-peer":
        result = r["error"][:100] if "error" in r else f"{r['tokens_per_s']:.0f} tok/s, peak {r['peak_reserved_gib']:.1f} GiB/GPU (reserved)"
        print(f"| peer: {r['engine']} | {r['model']} | {r['gpus']} | seq {r['sequence_len']} | {result} |")
    elif r["row"] == "bubble":
        print(f"| bubble | {r['model']} | {r['gpus']} | {r['stages']} stages, M={r['micro_batches']} | {verdict(r)} |")
    else:
        setting = r.get("layout") or f"seq {r.get('sequence_len')}" + (f", {r['data']}" if r.get("data") else "")
        print(f"| {r['row']} | {r['model']} | {r['gpus']} | {setting} | {verdict(r)} |")
one = next((r["losses"] for r in rows if r["row"] == "equivalence" and r.get("layout") == "one GPU" and "losses" in r), None)
for r in rows:
    if r["row"] == "equivalence" and one and "losses" in r and r["layout"] != "one GPU":
        worst = max(abs(a - b) / abs(a) for a, b in zip(one, r["losses"]))
        print(f"# bf16 {r['layout']}: largest relative loss difference against one GPU {worst:.2e}")
base = {r["micro_batches"]: r.get("tokens_per_s") for r in rows if r["row"] == "bubble" and r["stages"] == 1}
for r in rows:
    if r["row"] == "bubble" and r["stages"] > 1 and r.get("tokens_per_s") and base.get(1):
        p, m = r["stages"], r["micro_batches"]
        theory = base[1] * p * m / (m + p - 1)
        print(f"# bubble {p} stages, M={m}: {r['tokens_per_s']:.0f} tok/s against 1F1B's {theory:.0f} "
              f"(one GPU × {p} × M/(M+P−1)); ratio {r['tokens_per_s'] / theory:.2f}")
PY
