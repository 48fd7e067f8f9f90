# Sourced by bench/run_peers.sh and bench/run_lora_job.sh: one transformers(+PEFT) job on the GPU,
# retried with gradient checkpointing when it runs out of memory; prints its JSON record line.
#   peer_run MODEL MODE [hf_peft_bench.py flags...]      (stderr goes to the caller's)
peer_run() {
  local script line
  script="$(dirname "${BASH_SOURCE[0]}")/hf_peft_bench.py"
  line=$(python3 "$script" --model "$1" --mode "$2" "${@:3}" | tail -1)
  if [[ "$line" == *'"error"'* && "$line" == *"OutOfMemory"* ]]; then
    line=$(python3 "$script" --model "$1" --mode "$2" --checkpointing "${@:3}" | tail -1)
  fi
  echo "$line"
}
