#!/usr/bin/env bash
# Per-kernel GPU time of one decode step of `surogate generate` at a batch of ROWS rows (GRPO's
# rollouts decode 512 rows at once), under Nsight Compute, on the GPU machine:
#
#   bash bench/profile_generate.sh MODEL LAYERS ROWS CONTEXT     e.g. qwen3-1.7b 2 512 300
#
# MODEL keeps its shapes with LAYERS layers (bench/cli/make_hf_model.py, random bf16 weights).
# Each of ROWS prompts holds CONTEXT random ids; the run samples at temperature 1 on the device.
# Two runs, 1 and 1 + STEPS new tokens (STEPS: 16): the difference of their kernel times is
# STEPS decode steps at a cache of CONTEXT..CONTEXT+STEPS tokens, without the prefill. Prints one
# row per kernel name: µs per decode step and launches per step, sorted by time, then the total
# (kernel time only: launch gaps and host work are not in it).
# Env: STEPS (16), CARRY_DIR (carry/cli), NCU (ncu); the raw CSVs go to $OUT when it is set.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cli surogate || exit 1
(( $# == 4 )) || { echo "usage: bench/profile_generate.sh MODEL LAYERS ROWS CONTEXT" >&2; exit 2; }
model=$1 layers=$2 rows=$3 context=$4 steps=${STEPS:-16}
ncu="${NCU:-ncu}"
command -v "$ncu" >/dev/null || { echo "profile_generate.sh: '$ncu' not found (Nsight Compute)" >&2; exit 2; }
work=/tmp/profile_generate
log="${OUT:-$work}"
mkdir -p "$work" "$log"
dir="$work/$model-$layers"
[[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" "$layers" >/dev/null || exit 1
python3 - "$rows" "$context" >"$work/prompts.jsonl" <<'PY'
import json, random, sys
random.seed(0)
for _ in range(int(sys.argv[1])):
    print(json.dumps({"input_ids": [random.randint(1000, 99999) for _ in range(int(sys.argv[2]))]}))
PY
for new in 1 $((1 + steps)); do
  "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    "$CARRY_DIR/surogate" generate --model "$dir" --device cuda --input "$work/prompts.jsonl" \
    --output "$work/out.jsonl" --batch_size "$rows" --max_new_tokens "$new" --temperature 1 --seed 1 \
    >"$log/ncu-new$new.csv" 2>"$work/ncu.err" ||
    { echo "profile_generate.sh: the run of $new new tokens failed:" >&2; tail -20 "$work/ncu.err" >&2; exit 1; }
done
PYTHONPATH="$root/bench" python3 - "$steps" "$model" "$layers" "$rows" "$context" "$log/ncu-new1.csv" \
  "$log/ncu-new$((1 + steps)).csv" <<'PY'
import collections, csv, sys
from kernel_names import short
steps, model, layers, rows, context = int(sys.argv[1]), *sys.argv[2:6]
def totals(path):
    table = list(csv.reader(line for line in open(path) if line.startswith('"')))
    header = next(r for r in table if "Kernel Name" in r)
    index = {name: i for i, name in enumerate(header)}
    out = collections.defaultdict(lambda: [0, 0.0])
    for r in table:
        if r[index["ID"]].isdigit():
            t = out[short(r[index["Kernel Name"]])]
            t[0] += 1
            t[1] += float(r[index["gpu__time_duration.sum"]].replace(",", "") or 0)
    return out
short_run, long_run = totals(sys.argv[6]), totals(sys.argv[7])
step = {n: [(long_run[n][0] - short_run.get(n, [0, 0])[0]) / steps, (long_run[n][1] - short_run.get(n, [0, 0])[1]) / steps / 1e3]
        for n in long_run}
print(f"{model} with {layers} layers, {rows} rows at {context}+ cached tokens: GPU µs per decode step "
      f"({steps} steps), ncu --clock-control none")
print("| kernel | µs / step | launches / step |")
print("| --- | ---: | ---: |")
for name, (launches, us) in sorted(step.items(), key=lambda kv: -kv[1][1]):
    if launches > 0 or us > 0.5:
        print(f"| {name} | {us:.1f} | {launches:.1f} |")
print(f"| **total** | **{sum(v[1] for v in step.values()):.1f}** | {sum(v[0] for v in step.values()):.1f} |")
PY
