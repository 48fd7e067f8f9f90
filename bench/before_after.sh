#!/usr/bin/env bash
# Before / after a change, in one GPU call: bench/run_multi_gpu.sh's scaling rows (`surogate pt` on
# HF folders with random weights, the fast settings, ZeRO-1) run with an older `surogate` binary and
# the new one, model by model, so both see the same machine. The issue-40 rule "the CLI figures of
# the 8B LoRA and 1.7B full jobs stay within 2 %" is checked with it.
# Here, first: the new binary as usual (BUILD_DIR=build CARRY_DIR=carry/cli CARRY_BINARIES=surogate
# scripts/gpu_check.sh --prepare) and the older one built at its commit, then
# `strip --strip-debug surogate && xz -6 -c surogate > carry/surogate-before.xz`. On the GPU machine:
# `DP_GPUS="1 2 4" bash bench/before_after.sh` with carry ["carry/cli.tar.xz", "carry/surogate-before.xz"].
# Env: MODELS ("qwen3-1.7b:full qwen3-8b:lora"), DP_GPUS ("1 2 4"; LoRA rows run on one GPU), DP_STEPS (10).
# Records: $OUT/before/multi_gpu.jsonl and $OUT/after/multi_gpu.jsonl (tokens/s, peak and predicted memory).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[[ -x carry/cli/surogate ]] || tar -xJf carry/cli.tar.xz -C carry || exit 1
rm -rf carry/before && cp -r carry/cli carry/before || exit 1
xz -dc carry/surogate-before.xz >carry/before/surogate && chmod +x carry/before/surogate || exit 1
export DP_WORK=/tmp/before_after PEERS=0 SKIP_TESTS=1 DP_ZERO=1 DP_STEPS=${DP_STEPS:-10}
base=${OUT:-/tmp/before_after_out}
for spec in ${MODELS:-qwen3-1.7b:full qwen3-8b:lora}; do
  gpus="${DP_GPUS:-1 2 4}"
  [[ $spec == *lora ]] && gpus=1
  for version in before after; do
    folder=carry/cli
    [[ $version == before ]] && folder=carry/before
    mkdir -p "$base/$version"
    OUT=$base/$version CARRY_DIR=$root/$folder DP_MODELS=$spec DP_GPUS="$gpus" bash bench/run_multi_gpu.sh 2>&1 |
      grep -E '^\{' | sed "s/^/$version /"
  done
done
