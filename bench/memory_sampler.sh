# Sourced by bench/run_grpo_job.sh and bench/run_vl_job.sh: GPU memory sampled by nvidia-smi every
# 200 ms into a file, on the first visible GPU (another job may run on the others); nothing but an
# empty file when $device is not cuda (the CPU smoke tests).
#   start_sampler FILE, stop_sampler
gpu_index="${CUDA_VISIBLE_DEVICES:-0}"
gpu_index="${gpu_index%%,*}"
sampler=""
start_sampler() {
  : >"$1"
  [[ "$device" == cuda ]] || return 0
  nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$1" 2>/dev/null &
  sampler=$!
}
stop_sampler() { [[ -n "$sampler" ]] && { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }; sampler=""; }
