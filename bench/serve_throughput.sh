#!/usr/bin/env bash
# Many requests at once (issue 46's second speed row): `surogate serve --device cuda` on a Qwen3
# shape with random bf16 weights (bench/cli/make_hf_model.py), REQUESTS concurrent streaming
# completions of PROMPT random ids and NEW greedy tokens (bench/serve_concurrent.py), then
# transformers' generate_batch (continuous batching) and batched generate on the same folder in the
# same call (bench/peers/hf_generate_batch.py). With LOAD=1, bench/serve_load.py against the same
# server too (500 requests from 32 clients, its memory before and after).
# On the GPU machine, with carry ["carry/gen.tar.xz"]:  CARRIED=carry/gen MODEL=qwen3-8b bash bench/serve_throughput.sh
# Prints one JSON record per engine (bench/results/*-serve-throughput.jsonl).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
carried=${CARRIED:-carry/cli}
[[ -x $carried/surogate ]] || tar -xJf "$carried.tar.xz" -C "$(dirname "$carried")" || exit 1
export LD_LIBRARY_PATH=$root/$carried/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
model=${MODEL:-qwen3-8b}
requests=${REQUESTS:-64}
prompt=${PROMPT:-512}
new=${NEW:-256}
dir=/tmp/generate_bench/$model
mkdir -p /tmp/generate_bench
[[ -f $dir/config.json ]] || python3 bench/cli/make_hf_model.py "$model" "$dir" >/dev/null || exit 1
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
log=/tmp/generate_bench/serve.log
"$carried/surogate" serve --model "$dir" --device cuda --port 0 --batch_size "$requests" \
  --max_context $((prompt + new + 64)) >"$log" 2>&1 &
server=$!
for _ in $(seq 600); do grep -q "^serving" "$log" && break; kill -0 $server 2>/dev/null || break; sleep 0.5; done
line=$(grep "^serving" "$log") || { cat "$log"; kill $server 2>/dev/null; exit 1; }
url=$(sed -E 's/.* on (http:[^ ]+)$/\1/' <<<"$line")
name=$(awk '{print $2}' <<<"$line")
python3 bench/serve_concurrent.py --url "$url" --model "$name" --requests "$requests" --prompt "$prompt" \
  --new "$new" --label "$model $gpu" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['gpu']='$gpu'; print(json.dumps(r))"
[[ ${LOAD:-0} == 1 ]] && python3 bench/serve_load.py --url "$url" --model "$name" --pid $server
kill -TERM $server; wait $server
[[ ${PEERS:-1} == 1 ]] && python3 bench/peers/hf_generate_batch.py "$dir" "$requests" "$prompt" "$new" "$model" "$gpu"
