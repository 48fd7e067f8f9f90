# Sourced by bench/run_dpo_job.sh and bench/run_grpo_job.sh: appends a training mode's lines to a
# run's YAML, as the peers are configured: LoRA r16 (alpha 32, no dropout) or full fine-tuning,
# every recomputation off (LoRA's too).
#   append_mode_yaml MODE FILE   (MODE: lora or full)
append_mode_yaml() {
  local mode="$1" file="$2" r
  if [[ "$mode" == lora ]]; then
    printf 'lora: true\nlora_rank: 16\nlora_alpha: 32\nlora_dropout: 0.0\n' >>"$file"
  else
    printf 'lora: false\n' >>"$file"
  fi
  for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block recompute_lora; do
    [[ "$mode" == full && "$r" == recompute_lora ]] || printf '%s: false\n' "$r" >>"$file"
  done
}
