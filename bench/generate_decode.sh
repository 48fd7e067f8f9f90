#!/usr/bin/env bash
# Decode speed of one request (issue 46's first speed row): `surogate generate --device cuda` on a
# Qwen3 shape with random bf16 weights (bench/cli/make_hf_model.py), a prompt of PROMPT random ids and
# NEW greedy tokens, against transformers' generate() on the same folder in the same call.
# On the GPU machine, with carry ["carry/cli.tar.xz"]:  MODEL=qwen3-8b bash bench/generate_decode.sh
# Prints one JSON record per side (bench/results/*-generate-decode.jsonl; decode_tok_s is the rate).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
carried=${CARRIED:-carry/cli}  # the folder scripts/gpu_check.sh --prepare filled (its .tar.xz is carried)
[[ -x $carried/surogate ]] || tar -xJf "$carried.tar.xz" -C "$(dirname "$carried")" || exit 1
export LD_LIBRARY_PATH=$root/$carried/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
model=${MODEL:-qwen3-8b}
prompt=${PROMPT:-512}
new=${NEW:-256}
dir=/tmp/generate_bench/$model
mkdir -p /tmp/generate_bench
[[ -f $dir/config.json ]] || python3 bench/cli/make_hf_model.py "$model" "$dir" >/dev/null || exit 1
python3 - "$prompt" >/tmp/generate_bench/prompt.jsonl <<'PY'
import json, random, sys
random.seed(0)
print(json.dumps({"input_ids": [random.randint(1000, 99999) for _ in range(int(sys.argv[1]))]}))
PY
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
line=$("$carried/surogate" generate --model "$dir" --device cuda --input /tmp/generate_bench/prompt.jsonl \
  --output /tmp/generate_bench/out.jsonl --max_new_tokens "$new" --temperature 0 2>&1 >/dev/null | tail -1)
# The speed line: "generated N tokens for P prompt tokens: prefill X s, decode Y s (S steps, R steps/s)".
python3 - "$line" "$model" "$gpu" "$prompt" "$new" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, re, sys
line, model, gpu, prompt, new, commit = sys.argv[1:]
m = re.search(r"prefill ([\d.]+) s, decode ([\d.]+) s \((\d+) steps, ([\d.]+) steps/s\)", line)
if not m:
    sys.exit(f"no speed line from surogate generate: {line}")
print(json.dumps({"engine": "surogate", "model": model, "gpu": gpu, "commit": commit, "prompt": int(prompt),
                  "new": int(new), "prefill_s": float(m[1]), "decode_s": float(m[2]), "decode_steps": int(m[3]),
                  "decode_tok_s": float(m[4])}))
PY
# (an if, not `[[ ]] &&`: with PEERS=0 the script must still exit 0 — bench/decode_ab.sh reads its status)
if [[ ${PEERS:-1} == 1 ]]; then python3 bench/peers/hf_generate.py "$dir" "$prompt" "$new" "$model" "$gpu"; fi
