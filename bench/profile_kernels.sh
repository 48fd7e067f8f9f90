#!/usr/bin/env bash
# Per-kernel time, DRAM traffic and SM load of one training micro-batch under Nsight
# Compute, on the GPU machine (after `scripts/gpu_check.sh --prepare` here carried the binaries):
#
#   bash bench/profile_kernels.sh [model] [layers]     (default: qwen3-8b with 2 layers)
#
# The model keeps its shapes (hidden, heads, vocab) with fewer layers, so that every kernel of a
# layer is profiled in a few hundred launches. Prints one row per kernel name, sorted by time:
# launches, total ms, DRAM GB read + written, achieved TB/s, SM throughput (% of peak, the
# busiest SM pipe) and active warps (% of the SM's maximum); the raw ncu CSV goes to $OUT/ncu.csv when OUT is set.
# Env: PROFILE_MODE (lora; or full, fwd-bwd), PROFILE_FILTER (ncu --kernel-name regex; default
# every kernel), PROFILE_LAUNCHES (600), CARRY_DIR (carry/cuda), NCU (ncu). PROFILE_SECTIONS
# ("SpeedOfLight WarpStateStats ...", ncu section names) prints ncu's details of those sections
# for each profiled launch instead of the table (with PROFILE_FILTER and a few PROFILE_LAUNCHES).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cuda surogate_train_bench || exit 1
carry="$CARRY_DIR"
model="${1:-qwen3-8b}"
layers="${2:-2}"
mode="${PROFILE_MODE:-lora}"
case "$mode" in fwd-bwd) documents=packed ;; lora|full) documents=full ;;
  *) echo "profile_kernels.sh: PROFILE_MODE is fwd-bwd, lora or full, got '$mode'" >&2; exit 2 ;; esac
ncu="${NCU:-ncu}"
command -v "$ncu" >/dev/null || { echo "profile_kernels.sh: '$ncu' not found (Nsight Compute)" >&2; exit 2; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 - "$root" "$model" "$layers" "$dir" <<'PY' || exit 2
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from models import MODELS
if sys.argv[2] not in MODELS:
    sys.exit(f"profile_kernels.sh: unknown model '{sys.argv[2]}' (bench/models.py has {', '.join(MODELS)})")
config = MODELS[sys.argv[2]].hf_config()
config["num_hidden_layers"] = int(sys.argv[3])
json.dump(config, open(sys.argv[4] + "/config.json", "w"))
PY
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
csv="${OUT:-$dir}/ncu.csv"
filter=()
[[ -n "${PROFILE_FILTER:-}" ]] && filter=(--kernel-name "regex:${PROFILE_FILTER}")
bench_args=(--config "$dir" --name "$model" --mode "$mode" --documents "$documents" --seq 2048 --batch 2
            --grad-accum 1 --lora-rank 16 --steps 1 --warmup 0 --recompute none --lmhead-chunks 4 --cuda-graphs off)
if [[ -n "${PROFILE_SECTIONS:-}" ]]; then
  sections=()
  for section in $PROFILE_SECTIONS; do sections+=(--section "$section"); done
  exec "$ncu" --clock-control none "${sections[@]}" "${filter[@]}" --launch-count "${PROFILE_LAUNCHES:-3}" \
    "$carry/surogate_train_bench" "${bench_args[@]}"
fi
# One step of one micro-batch, eager (no CUDA graphs): the launches of the step, then the
# breakdown micro-batch the bench runs after it (the first PROFILE_LAUNCHES are profiled).
"$ncu" --clock-control none --metrics "$metrics" --csv --page raw "${filter[@]}" \
  --launch-count "${PROFILE_LAUNCHES:-600}" \
  "$carry/surogate_train_bench" "${bench_args[@]}" > "$csv" 2> "$dir/ncu.err" || { tail -20 "$dir/ncu.err" >&2; exit 1; }
PYTHONPATH="$root/bench" python3 - "$csv" "$model" "$layers" "$mode" <<'PY'
import collections, csv, sys
from kernel_names import short
rows = list(csv.reader(line for line in open(sys.argv[1]) if line.startswith('"')))
header = next(r for r in rows if "Kernel Name" in r)
index = {name: i for i, name in enumerate(header)}
totals = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0.0])
for r in rows:
    if not r[index["ID"]].isdigit():
        continue
    value = lambda metric: float(r[index[metric]].replace(",", "") or 0)
    t = totals[short(r[index["Kernel Name"]])]
    ns = value("gpu__time_duration.sum")
    t[0] += 1
    t[1] += ns
    t[2] += value("dram__bytes_read.sum") + value("dram__bytes_write.sum")
    t[3] += ns * value("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    t[4] += ns * value("sm__warps_active.avg.pct_of_peak_sustained_active")
print(f"{sys.argv[2]} with {sys.argv[3]} layers, {sys.argv[4]}: one micro-batch, eager, ncu --clock-control none")
print(f"| kernel | launches | ms | GB | TB/s | SM % | warps % |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, (n, ns, nbytes, tensor, warps, _) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
    print(f"| {name} | {n} | {ns / 1e6:.3f} | {nbytes / 1e9:.3f} | {nbytes / ns / 1e3 if ns else 0:.2f} | "
          f"{tensor / ns if ns else 0:.0f} | {warps / ns if ns else 0:.0f} |")
PY
