#!/usr/bin/env bash
# One request's decode, two builds side by side in one call (issue 46's before / after): runs
# bench/generate_decode.sh on carried folder A, then B, RUNS times alternately (the same random
# Qwen3 folder and prompt), and checks that both wrote the same completions (greedy: a kernel
# change that is meant to keep the bits must keep the tokens). Prints each run's record with its
# side, then one line {"same_completions": true|false, ...}; exits 1 when they differ.
# On the GPU machine: A=carry/new B=carry/old MODEL=qwen3-8b bash bench/decode_ab.sh
# (each folder holds `surogate` and `lib/`, as generate_decode.sh's CARRIED; RUNS defaults to 2,
# PEERS to 0).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
a=${A:?A=<carried folder of the first build>} b=${B:?B=<carried folder of the second build>}
runs=${RUNS:-2}
work=$(mktemp -d)
status=0
for ((i = 1; i <= runs; ++i)); do
  for side in A B; do
    folder=$a
    [[ $side == B ]] && folder=$b
    line=$(CARRIED=$folder PEERS=${PEERS:-0} bash "$root/bench/generate_decode.sh" | head -1) || status=1
    echo "{\"side\": \"$side\", \"folder\": \"$folder\", \"run\": $i, \"record\": ${line:-null}}"
    cp /tmp/generate_bench/out.jsonl "$work/$side-$i.jsonl" 2>/dev/null || status=1
  done
done
same=true
for file in "$work"/*.jsonl; do cmp -s "$file" "$work/A-1.jsonl" || same=false; done
echo "{\"same_completions\": $same, \"runs\": $runs}"
[[ $same == true ]] || status=1
rm -rf "$work"
exit $status
