# The `surogate` CLI variants of bench/run_cli_job.sh (its header names them), as config files:
#   command_of VARIANT                 the CLI command the variant runs (pt, or sft for tool data)
#   variant_yaml VARIANT MODEL_DIR OUT_DIR   the config file on stdout
# Sourced by bench/run_cli_job.sh and bench/profile_cli.sh; reads $work (the data files'
# folder), $steps and CLI_DATA / CLI_ACCUM.
command_of() { [[ "$1" == tools* ]] && echo sft || echo pt; }  # tool variants train conversations

variant_yaml() {  # variant model_dir out_dir (one per model: the token cache under it is reused)
  local data="$work/text.jsonl" type=text
  [[ "$1" == *-long ]] && data="$work/text-long.jsonl"
  [[ "$1" == tools* ]] && data="$work/tools.jsonl" type=conversation
  [[ "${CLI_DATA:-}" == real && "$1" != tools* ]] && data="$work/real.jsonl"
  cat <<YAML
model: $2
output_dir: $3
log_file: $3/log-$1.jsonl
datasets:
  - path: $data
    type: $type
sequence_len: 2048
max_steps: $steps
YAML
  [[ "${CLI_DATA:-}" == real ]] && printf 'num_epochs: 20\n'
  # Architectures without C++ (bench/models.py's GPT-NeoX): their Python DSL definition.
  grep -q '"model_type": "gpt_neox"' "$2/config.json" 2>/dev/null && printf 'model_definition: %s\n' "$root/examples/dsl/gpt_neox.py"
  [[ -n "${CLI_ACCUM:-}" ]] && printf 'gradient_accumulation_steps: %s\n' "$CLI_ACCUM"
  # VARIANT-fp16: the variant with fp16 training (torch_dtype: float16, dynamic loss scaling).
  if [[ "$1" == *-fp16 ]]; then printf 'torch_dtype: float16\n'; set -- "${1%-fp16}" "${@:2}"; fi
  if [[ "$1" == *save ]]; then printf 'save_steps: 5\nsave_total_limit: 2\n'; else printf 'save_steps: 1000\n'; fi
  case "$1" in
    defaults) ;;
    qlora-fast|qlora-fp8-fast)
          if [[ "$1" == qlora-fast ]]; then printf 'qlora_bnb: true\n'; else printf 'qlora_fp8: true\n'; fi
          printf 'lora_dropout: 0.0\n'
          for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block \
                   recompute_lora; do printf '%s: false\n' "$r"; done ;;
    fast|fast-long|tools|tools-hermes|tools-react) printf 'lora_dropout: 0.0\n'
          [[ "$1" == tools-hermes ]] && printf 'loss_scale: hermes\n'
          [[ "$1" == tools-react ]] && printf 'agent_template: react_en\nloss_scale: react\n'
          # -long: documents of 2,300+ tokens cut to the row (one document per row, as the bench
          # binary's rows): the CLI / binary comparison on the same work.
          [[ "$1" == fast-long ]] && printf 'truncation_strategy: right\n'
          for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block \
                   recompute_lora; do printf '%s: false\n' "$r"; done ;;
    recommended) printf 'apply_recommended_values: true\n' ;;
    fp8) printf 'recipe: fp8_hybrid\n' ;;  # the fp8_hybrid recipe with the defaults
    fp8-fast) printf 'recipe: fp8_hybrid\nlora_dropout: 0.0\n'
          for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block \
                   recompute_lora; do printf '%s: false\n' "$r"; done ;;
    qlora) printf 'qlora_bnb: true\n' ;;  # QLoRA NF4 (block 64, double quantization) with the defaults
    qlora-fp8) printf 'qlora_fp8: true\n' ;;  # QLoRA FP8 E4M3 (blocks of 128 x 128) with the defaults
    qlora-fp4) printf 'qlora_fp4: true\n' ;;  # QLoRA NVFP4 (Four Over Six), dequantized to bf16, with the defaults
    fp8-qlora) printf 'recipe: fp8_hybrid\nqlora_bnb: true\n' ;;  # the NF4 base dequantized, then E4M3 per micro-batch
    full|full-save) printf 'lora: false\n' ;;  # full fine-tuning with the defaults: where recompute must choose
    full-fp8) printf 'lora: false\nrecipe: fp8_hybrid\n' ;;  # the same with fp8_hybrid (FP8 copy per step)
    full-fast|full-fp8-fast) printf 'lora: false\n'  # full fine-tuning, recompute off
          [[ "$1" == full-fp8-fast ]] && printf 'recipe: fp8_hybrid\n'
          for r in recompute_swiglu recompute_rmsnorm recompute_ffn recompute_qkv recompute_att recompute_block; do
            printf '%s: false\n' "$r"; done ;;
    save) ;;  # the defaults (LoRA), a checkpoint every 5 steps
    lmhead8) printf 'lmhead_chunks: 8\n' ;;
    attn-chunks) printf 'lmhead_chunks: 8\nattn_bwd_chunks: 2\n' ;;  # attention backward over 2 slices of the rows
    full-b4) printf 'lora: false\nper_device_train_batch_size: 4\n' ;;  # more than fits: partial recompute
    # Full fine-tuning with the masters and optimizer state in pinned host memory: staged through
    # two GPU slots (-offload), read through the mapping (-offload-zc), and the gradient
    # accumulators too (-offload-all).
    full-offload) printf 'lora: false\noffload_master: true\noffload_optimizer: true\n' ;;
    full-offload-zc) printf 'lora: false\noffload_master: true\noffload_optimizer: true\nuse_zero_copy: true\n' ;;
    full-offload-all) printf 'lora: false\noffload_master: true\noffload_optimizer: true\noffload_grads: true\n' ;;
    # -offload plus the residual stream's checkpoints in pinned host memory (offload_residual,
    # with the recompute defaults: what recompute_block keeps then leaves the GPU too).
    full-offload-residual) printf 'lora: false\noffload_master: true\noffload_optimizer: true\noffload_residual: true\n' ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}
