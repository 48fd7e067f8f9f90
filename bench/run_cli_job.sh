#!/usr/bin/env bash
# The user's path on the GPU machine, in one call: for each model, an HF model folder (random
# bf16 weights, the real Qwen3 tokenizer: bench/cli/make_hf_model.py) and a packed-text dataset
# (bench/cli/make_text_data.py), then the `surogate` CLI itself — `surogate pt config.yaml` —
# with the reference's defaults (LoRA r16 all-linear, lora_dropout 0.05, every recompute_* on,
# adamw_8bit; seq 2048, micro-batch 2, grad-accum 4) and with the fast settings (recompute off,
# lora_dropout 0), the bench binary on the fast settings (the CLI and it must agree within 3 %),
# and transformers + PEFT on the same GPU (bench/peers/peer_run.sh; PEERS=0 skips; transformers
# alone, every weight trained, for the full-* variants), also with Liger-Kernel when it is
# importable (the table's ratio is against the stronger of the two).
# Prints tokens/s (median of the steps after the first two), MFU against the measured bf16 matmul
# ceiling, peak GPU memory (nvidia-smi, sampled), and the start-up: seconds from the command to
# the first step, as the trainer logs it ("startup" record: data, plan, weights, upload, first
# eval), with the token cache built (first run) and reused (the runs after it).
# Here, first: BUILD_DIR=build CARRY_DIR=carry/cli CARRY_BINARIES="surogate
# tests/runtime_cuda/surogate_train_bench" scripts/gpu_check.sh --prepare; then on the GPU machine
# `CARRY_DIR=$PWD/carry/cli bash bench/run_cli_job.sh` with carry ["carry/cli.tar.xz"] (a full
# carry/cudal from a plain --prepare works too, and is the default).
# Env: CLI_MODELS (qwen3-0.6b qwen3-8b), CLI_VARIANTS (defaults fast fast-long; also recommended,
# qlora, qlora-fast, qlora-fp8, qlora-fp8-fast, qlora-fp4, fp8, fp8-fast, fp8-qlora, full, full-b4,
# full-fast, full-fp8, full-fp8-fast, full-offload, full-offload-zc, full-offload-all,
# full-offload-residual; MFU is against the bf16 ceiling for every variant, with full fine-tuning's
# FLOPs for the full-* variants; fp8_hybrid runs also carry mfu_fp8, against the FP8 ceiling),
# tools, tools-hermes, tools-react: `surogate sft` on a tool-calling conversation dataset
# (bench/cli/make_tool_data.py) with the fast settings and loss_scale default / hermes (per-token
# weights; tools vs tools-hermes is the cost of the weights, issue 24: at most 2 %) / agent_template
# react_en with loss_scale react),
# lmhead8 (the defaults with lmhead_chunks: 8, so the LM head no longer holds the largest scratch)
# and attn-chunks (the same with attn_bwd_chunks: 2: the peak-memory difference is what the
# chunked attention backward saves), save and full-save (the defaults, LoRA or full fine-tuning,
# with a checkpoint every 5 steps: the record's save_step_ratio is the wall time of each step that
# follows a save (the save's snapshot is in it) over the median of the others, with the snapshot's
# blocked_seconds and bytes)),
# any variant with -fp16 appended (fast-fp16, full-fast-fp16, ...): the same with torch_dtype: float16,
# CLI_STEPS (10), CLI_ACCUM (the reference's gradient_accumulation_steps unless set),
# CLI_DATA=real (every variant trains on real English prose instead of the synthetic text:
# bench/cli/make_real_text.py, the Python reference's help topics and the standard library's
# docstrings, num_epochs 20 so that max_steps ends the run; for loss curves),
# BENCH_BINARY=0 (skip the bench binary), PEERS=0, PEER_STEPS (5). Records: $OUT/cli.jsonl.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cudal surogate || exit 1
log="${OUT:-/tmp/cli_job}"
work="${CLI_WORK:-/tmp/cli_work}"
mkdir -p "$log" "$work"
surogate="$CARRY_DIR/surogate"
steps="${CLI_STEPS:-10}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
[[ -f "$work/text.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text.jsonl" 2000 50 600
[[ -f "$work/text-long.jsonl" ]] || python3 "$root/bench/cli/make_text_data.py" "$work/text-long.jsonl" 200 2000 2100
[[ -f "$work/tools.jsonl" ]] || python3 "$root/bench/cli/make_tool_data.py" "$work/tools.jsonl" 2000
[[ "${CLI_DATA:-}" != real || -f "$work/real.jsonl" ]] || python3 "$root/bench/cli/make_real_text.py" "$work/real.jsonl"
gpu_index="${CUDA_VISIBLE_DEVICES:-0}"  # the memory sampler's GPU (another job may run on the others)
gpu_index="${gpu_index%%,*}"

source "$root/bench/cli/variants.sh"  # command_of, variant_yaml: the variants named above

source "$root/bench/peers/peer_run.sh"
status=0
for model in ${CLI_MODELS:-qwen3-0.6b qwen3-8b}; do
  dir="$work/$model"
  [[ -f "$dir/config.json" ]] || python3 "$root/bench/cli/make_hf_model.py" "$model" "$dir" || { status=1; continue; }
  rm -rf "$work/out-$model"  # the first variant builds the token cache, the others reuse it
  for variant in ${CLI_VARIANTS:-defaults fast fast-long}; do
    out="$work/out-$model"
    variant_yaml "$variant" "$dir" "$out" >"$work/$model-$variant.yaml"
    # The dry run's predicted peak (train/memory_prediction.h), set beside the measured one.
    "$surogate" "$(command_of "$variant")" "$work/$model-$variant.yaml" --dry-run >"$work/dryrun.txt" 2>&1 ||
      echo "$model $variant: dry run failed"
    nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/mem.txt" 2>/dev/null &
    sampler=$!
    start=$(date +%s.%N)
    "$surogate" "$(command_of "$variant")" "$work/$model-$variant.yaml" >"$log/$model-$variant.log" 2>&1 ||
      { echo "$model $variant: exit $?"; status=1; }
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    python3 - "$out/log-$variant.jsonl" "$model" "$variant" "$start" "$work/mem.txt" "$root" "$work/dryrun.txt" <<'PY' | tee -a "$log/cli.jsonl"
import glob, json, re, statistics, sys
sys.path.insert(0, sys.argv[6] + "/bench")
from models import MODELS
out, model, variant, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
records = [json.loads(l) for f in glob.glob(out) for l in open(f) if l.startswith("{")]
steps = [r for r in records if r.get("event", r.get("type")) == "step" or ("tokens_per_second" in r and "step" in r)]
startup = next((r for r in records if "total_seconds" in r), {})
first_step = min((r["time"] - r["step_seconds"] for r in steps), default=None)
timed = [r["tokens_per_second"] for r in steps[2:]] or [r["tokens_per_second"] for r in steps]
mem = [float(x) for x in open(sys.argv[5]).read().split() if x.replace(".", "").isdigit()]
tps = statistics.median(timed) if timed else 0.0
flops = MODELS[model].training_flops_per_token(2048, "full" if variant.startswith("full") else "lora")
ceiling = 786.1
# fp8_hybrid runs also get an MFU against the FP8 ceiling (E4M3 products with fast accumulation,
# bench/matmul_ceiling.py on an H200, 2026-11-28): a floor, as their norms, attention, LM head and
# adapters run at bf16's rate.
fp8_ceiling = 1388.7
log_text = open(sys.argv[7]).read()
fp8_recipe = "fp8_hybrid recipe" in log_text
predicted = re.search(r"predicted peak\s+([0-9.]+) GiB", log_text)
# Saving steps: a checkpoint is snapshotted after step s is logged, so the wall time from step s's
# record to step s + 1's holds the save's blocking part; compared with the median of the others.
saves = {r["step"]: r for r in records if r.get("type") == "checkpoint"}
gaps = {b["step"]: b["time"] - a["time"] for a, b in zip(steps, steps[1:])}
after_save = [gaps[s + 1] for s in saves if s + 1 in gaps]
plain = [g for s, g in gaps.items() if s - 1 not in saves and s > 3]
save_ratio = statistics.median(after_save) / statistics.median(plain) if after_save and plain else None
print(json.dumps({"model": model, "variant": variant, "engine": "surogate CLI", "tokens_per_s": tps,
                  "tflops": tps * flops / 1e12, "mfu": tps * flops / 1e12 / ceiling,
                  "mfu_fp8": tps * flops / 1e12 / fp8_ceiling if fp8_recipe else None,
                  "peak_mem_gib": max(mem, default=0) / 1024, "steps": len(steps),
                  "predicted_peak_gib": float(predicted.group(1)) if predicted else None,
                  "command_to_first_step_s": (first_step - start) if first_step else None,
                  "losses": [r.get("loss") for r in steps],
                  "save_step_ratio": save_ratio, "plain_step_s": statistics.median(plain) if plain else None,
                  "save_step_s": statistics.median(after_save) if after_save else None,
                  "checkpoint_blocked_s": [r.get("blocked_seconds") for r in saves.values()],
                  "checkpoint_write_s": [r.get("write_seconds") for r in saves.values()],
                  "checkpoint_bytes": next((r.get("bytes") for r in saves.values()), None),
                  "startup": startup}))
PY
  done
  if [[ "${BENCH_BINARY:-1}" != 0 ]]; then
    OUT="$log" BENCH_OPTIMIZER=adamw_8bit BENCH_LMHEAD_CHUNKS=1 BENCH_STEPS=6 BENCH_WARMUP=2 \
      bash "$root/bench/run_surogate.sh" --mode lora "$model" >>"$log/bench.log" 2>&1 || status=1
  fi
  if [[ "${PEERS:-1}" != 0 ]]; then
    # The peer in LoRA mode for the LoRA variants, in full mode (transformers, every weight) for full-*.
    modes=""
    for variant in ${CLI_VARIANTS:-defaults fast fast-long}; do
      case "$variant" in full*) [[ "$modes" == *full* ]] || modes+=" full" ;; *) [[ "$modes" == *lora* ]] || modes+=" lora" ;; esac
    done
    for mode in $modes; do
      peer_run "$model" "$mode" --steps "${PEER_STEPS:-5}" 2>>"$log/peers.log" >>"$log/peers.jsonl"
      # With Liger-Kernel importable (its wheel carried, see bench/results/HISTORY.md): the peer with it too.
      if python3 -c "import liger_kernel" 2>/dev/null; then
        peer_run "$model" "$mode" --steps "${PEER_STEPS:-5}" --liger 2>>"$log/peers.log" >>"$log/peers.jsonl"
      fi
    done
  fi
  rm -rf "$work/out-$model"
done
python3 - "$log" <<'PY'
import json, os, sys
log = sys.argv[1]
def load(name):
    path = os.path.join(log, name)
    rows = []
    if os.path.exists(path):
        for line in open(path):
            try: rows.append(json.loads(line))
            except json.JSONDecodeError: pass
    return rows
cli, binary, peers = load("cli.jsonl"), load("surogate.jsonl"), load("peers.jsonl")
peer = {}
for r in peers:  # the strongest peer of each model and mode (HF + PEFT, or with Liger when it ran)
    key = (r.get("model"), r.get("mode", "lora"))
    if "tokens_per_s" in r and r["tokens_per_s"] > peer.get(key, {}).get("tokens_per_s", 0):
        peer[key] = r
bench = {r["model"]: r for r in binary if "tokens_per_s" in r}
print("| model | settings | CLI tok/s | MFU | peak GiB | command → first step s | bench binary tok/s | CLI / binary | peer | peer tok/s | CLI / peer |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
for r in cli:
    b = bench.get(r["model"]) if r["variant"] == "fast-long" else None
    p = peer.get((r["model"], "full" if r["variant"].startswith("full") else "lora"))
    first = r["command_to_first_step_s"]
    print(f"| {r['model']} | {r['variant']} | {r['tokens_per_s']:.0f} | {100*r['mfu']:.1f}% | {r['peak_mem_gib']:.1f} | "
          f"{first:.1f} | " if first is not None else f"| {r['model']} | {r['variant']} | {r['tokens_per_s']:.0f} | — | — | — | ", end="")
    print((f"{b['tokens_per_s']:.0f} | {r['tokens_per_s']/b['tokens_per_s']:.3f} | " if b else "— | — | ") +
          (f"{p['engine']} | {p['tokens_per_s']:.0f} | {r['tokens_per_s']/p['tokens_per_s']:.2f}x |" if p else "— | — | — |"))
for r in cli:
    if r.get("predicted_peak_gib") and r["peak_mem_gib"]:
        print(f"memory {r['model']} {r['variant']}: predicted {r['predicted_peak_gib']:.2f} GiB, measured "
              f"{r['peak_mem_gib']:.2f} GiB (nvidia-smi), {100 * (r['predicted_peak_gib'] / r['peak_mem_gib'] - 1):+.1f}%")
for r in cli:
    if r.get("save_step_ratio"):
        blocked = [b for b in r["checkpoint_blocked_s"] if b]
        rate = r["checkpoint_bytes"] / min(blocked) / 1e9 if blocked and r.get("checkpoint_bytes") else 0
        print(f"checkpoint {r['model']} {r['variant']}: step after a save {r['save_step_s']:.3f} s vs "
              f"{r['plain_step_s']:.3f} s ({r['save_step_ratio']:.3f}x); snapshot blocked {blocked} s for "
              f"{r['checkpoint_bytes'] / 2**30:.2f} GiB ({rate:.1f} GB/s), written in {r['checkpoint_write_s']} s")
for r in cli:
    s = r.get("startup") or {}
    print(f"start-up {r['model']} {r['variant']}: " + ", ".join(f"{k} {v:.1f}s" for k, v in s.items() if isinstance(v, (int, float))))
PY
exit $status
