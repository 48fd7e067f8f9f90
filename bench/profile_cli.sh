#!/usr/bin/env bash
# Per-kernel GPU time of the `surogate` CLI itself under Nsight Compute, variant beside variant, on
# the GPU machine (after `scripts/gpu_check.sh --prepare` here carried the binaries):
#
#   bash bench/profile_cli.sh MODEL LAYERS VARIANT...     e.g. qwen3-4b 2 fast fp8-fast
#
# MODEL keeps its shapes (hidden, heads, vocab) with LAYERS layers (bench/cli/make_hf_model.py), so
# that a few steps launch every kernel of a layer a few hundred times; each VARIANT is a config of
# bench/cli/variants.sh (the variants of bench/run_cli_job.sh) run for PROFILE_STEPS steps. Prints
# one row per kernel name: its GPU milliseconds per micro-batch (all launches of the run over
# steps × gradient_accumulation_steps, so start-up kernels are counted too but are few; the runs
# hold out no validation split, so no evaluation passes are counted) and launches
# per micro-batch, for each variant, sorted by the first variant's time, then the totals. Kernel
# time only: launch gaps and host work are not in it (the CLI's tokens/s is the whole).
# Env: PROFILE_STEPS (2), CLI_ACCUM (4), CARRY_DIR (carry/cudal), NCU (ncu); the raw CSVs go to
# $OUT/ncu-VARIANT.csv when OUT is set.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cudal surogate || exit 1
(( $# >= 3 )) || { echo "usage: bench/profile_cli.sh MODEL LAYERS VARIANT..." >&2; exit 2; }
model=$1 layers=$2
shift 2
ncu="${NCU:-ncu}"
command -v "$ncu" >/dev/null || { echo "profile_cli.sh: '$ncu' not found (Nsight Compute)" >&2; exit 2; }
work="${CLI_WORK:-/tmp/profile_cli}"
log="${OUT:-$work}"
mkdir -p "$work" "$log"
steps="${PROFILE_STEPS:-2}"
export CLI_ACCUM="${CLI_ACCUM:-4}"
source "$root/bench/cli/variants.sh"
[[ -f "$work/text.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text.jsonl" 2000 50 600
dir="$work/$model-$layers"
[[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" "$layers" >/dev/null || exit 1
csvs=()
for variant in "$@"; do
  out="$work/out-$variant"
  rm -rf "$out"
  variant_yaml "$variant" "$dir" "$out" >"$work/$variant.yaml" || exit 2
  # Training kernels only: no validation split, so no evaluation passes among the launches.
  printf 'validation_split_ratio: 0.0\n' >>"$work/$variant.yaml"
  "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    "$CARRY_DIR/surogate" "$(command_of "$variant")" "$work/$variant.yaml" >"$log/ncu-$variant.csv" 2>"$work/ncu.err" ||
    { echo "profile_cli.sh: $variant failed:" >&2; tail -20 "$work/ncu.err" >&2; exit 1; }
  csvs+=("$variant=$log/ncu-$variant.csv")
done
PYTHONPATH="$root/bench" python3 - "$steps" "$CLI_ACCUM" "$model" "$layers" "${csvs[@]}" <<'PY'
import collections, csv, sys
from kernel_names import short
steps, accum, model, layers = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
micro = steps * accum
variants, tables = [], []
for arg in sys.argv[5:]:
    variant, path = arg.split("=", 1)
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    header = next(r for r in rows if "Kernel Name" in r)
    index = {name: i for i, name in enumerate(header)}
    totals = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        if r[index["ID"]].isdigit():
            t = totals[short(r[index["Kernel Name"]])]
            t[0] += 1
            t[1] += float(r[index["gpu__time_duration.sum"]].replace(",", "") or 0)
    variants.append(variant)
    tables.append(totals)
print(f"{model} with {layers} layers: GPU ms per micro-batch ({steps} steps x {accum} micro-batches), "
      "ncu --clock-control none")
print("| kernel | " + " | ".join(f"{v} ms | {v} launches" for v in variants) + " |")
print("| --- |" + " ---: | ---: |" * len(variants))
names = sorted(set().union(*tables), key=lambda n: -max(t[n][1] if n in t else 0 for t in tables))
for name in names:
    cells = [f"{t[name][1] / 1e6 / micro:.3f} | {t[name][0] / micro:.1f}" if name in t else "— | —" for t in tables]
    print(f"| {name} | " + " | ".join(cells) + " |")
print("| **total** | " + " | ".join(f"**{sum(v[1] for v in t.values()) / 1e6 / micro:.3f}** | "
                                     f"{sum(v[0] for v in t.values()) / micro:.1f}" for t in tables) + " |")
PY
