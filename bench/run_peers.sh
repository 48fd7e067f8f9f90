#!/usr/bin/env bash
# Runs on the GPU machine: the matmul ceiling and the peer frameworks on the benchmark jobs.
# Writes JSON lines to $OUT/peers.jsonl (or ./peers.jsonl) and prints them.
#   LoRA r16 on qwen3-{0.6b,1.7b,4b,8b}; full fine-tuning on qwen3-{0.6b,1.7b}.
# Liger-Kernel runs too when its wheel was carried in carry/wheels/.
set -uo pipefail
cd "$(dirname "$0")/.."
out_dir=${OUT:-.}
results="$out_dir/peers.jsonl"
: >"$results"

liger=0
if ls carry/wheels/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --target /tmp/liger carry/wheels/liger_kernel-*.whl && liger=1
  export PYTHONPATH=/tmp/liger:${PYTHONPATH:-}
fi

python3 bench/matmul_ceiling.py | tee -a "$results"
source bench/peers/peer_run.sh
run_peer() {  # model mode [extra flags]
  peer_run "$@" 2>/dev/null | tee -a "$results"
}
for model in qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b; do
  run_peer "$model" lora
  [ "$liger" = 1 ] && run_peer "$model" lora --liger
done
for model in qwen3-0.6b qwen3-1.7b; do
  run_peer "$model" full
done
