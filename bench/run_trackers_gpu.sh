#!/usr/bin/env bash
# report_to + log_gpu_util on the GPU machine, end to end (issue 21): one `surogate sft` run of the
# quickstart model on the CUDA backend with report_to: [wandb, aim] (wandb offline, a local Aim
# repository) and log_gpu_util: 5, then bench/check_trackers.py --require-gpu: the JSONL log, the
# HTML report and both trackers' records must hold the same numbers.
# Here first:  BUILD_DIR=build CARRY_DIR=carry/cli CARRY_BINARIES=surogate scripts/gpu_check.sh --prepare
# GPU machine: CARRY_DIR=$PWD/carry/cli bash bench/run_trackers_gpu.sh     (carry ["carry/cli.tar.xz"])
# When python3 there cannot import wandb and aim, the engine's feed to the tracker helper is
# recorded (bench/record_tracker_feed.sh) and the run's output comes back in $OUT/trackers; then
# here:  cp -r <files_at>/trackers /tmp/trackers && chmod -R u+w /tmp/trackers &&
#        python3 bench/check_trackers.py /tmp/trackers/out --replay /tmp/trackers/tracker_feed.jsonl --require-gpu
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/carry_env.sh"
use_carry cli surogate || exit 1
result="${OUT:-/tmp/trackers_gpu}/trackers"
work="${TRACKERS_WORK:-/tmp/trackers_work}"
rm -rf "$work" && mkdir -p "$work" "$result"
python3 "$root/examples/quickstart/make_example.py" "$work/ex" >/dev/null || exit 1
cat >"$work/trackers.yaml" <<YAML
model: $work/ex/model
output_dir: $work/out
sequence_len: 64
use_chat_template: false
optimizer: adamw
learning_rate: 1e-2
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
max_steps: 40
eval_steps: 10
save_steps: 20
log_gpu_util: 5
report_to: [wandb, aim]
wandb_project: surogate-gpu-check
aim_repo: $work/out/aim
aim_experiment: surogate-gpu-check
datasets:
  - path: $work/ex/train.jsonl
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {instruction} = {output}"
validation_datasets:
  - path: $work/ex/valid.jsonl
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {instruction} = {output}"
YAML
export WANDB_MODE=offline
if python3 -c "import wandb, aim" 2>/dev/null; then
  sdks=1
else
  sdks=0
  echo "python3 here lacks wandb or aim: recording the tracker feed for bench/check_trackers.py --replay"
  export SUROGATE_PYTHON="$root/bench/record_tracker_feed.sh" TRACKER_FEED_COPY="$result/tracker_feed.jsonl"
fi
"$CARRY_DIR/surogate" sft "$work/trackers.yaml" 2>&1 | tee "$result/run.txt"
status=${PIPESTATUS[0]}
echo "surogate exit status $status"
rm -rf "$work/out/checkpoint-"* "$work/out/tokenized"
cp -r "$work/out" "$result/out"
if [[ $sdks == 1 ]]; then
  python3 "$root/bench/check_trackers.py" "$work/out" --require-gpu 2>&1 | tee "$result/check.txt"
  exit "${PIPESTATUS[0]}"
fi
exit "$status"
