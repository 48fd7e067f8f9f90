"""The preference-tuning peer: TRL's DPOTrainer (+ PEFT for LoRA) on the same model folder and
pairs as `surogate dpo` (bench/run_dpo_job.sh), on the GPU.

TRL's defaults for the rest: the sigmoid loss (beta 0.1), the reference model as TRL builds it
(LoRA: the base with the adapter switched off, one extra forward per step; full fine-tuning: a
frozen copy of the model), keep_start truncation to max_length, its own data collator and AdamW
(torch, fused). bf16 weights, SDPA attention, gradient checkpointing off unless --checkpointing;
--liger uses TRL's Liger path (`use_liger_kernel`: Liger's fused linear DPO loss) when the wheel
was carried. Prints one JSON record: pairs/s and tokens/s (prompt + completion tokens of both
sides, as trained) over the steps after --warmup, peak GPU memory.

  python3 bench/peers/trl_dpo_bench.py --model-dir DIR --data pairs.jsonl --mode lora --steps 6
"""
import json
import os
import sys
import time

from trainer_peer import lora_config, print_record, trainer_parser


def run(args):
    import datasets
    import peft
    import torch
    import transformers
    import trl

    rows = [json.loads(line) for line in open(args.data)]
    pairs_per_step = args.micro_batch * args.grad_accum
    needed = pairs_per_step * (args.steps + args.warmup)
    if len(rows) < needed:
        raise SystemExit(f"{args.data}: {len(rows)} pairs, the run needs {needed}")
    dataset = datasets.Dataset.from_list(rows[:needed])
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16,
                                                              attn_implementation="sdpa").to("cuda")
    peft_config = lora_config(args)
    config = trl.DPOConfig(
        output_dir="/tmp/trl_dpo_out", per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.grad_accum, max_steps=args.steps + args.warmup, learning_rate=1e-5,
        max_length=args.max_length, bf16=True, logging_steps=1, report_to=[], save_strategy="no",
        gradient_checkpointing=args.checkpointing, use_liger_kernel=args.liger, loss_type=["sigmoid"], beta=0.1,
        dataloader_num_workers=0, seed=0)
    times = []

    class StepTimes(transformers.TrainerCallback):
        def on_step_end(self, *_, **__):
            torch.cuda.synchronize()
            times.append(time.perf_counter())

    trainer = trl.DPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                             peft_config=peft_config, callbacks=[StepTimes()])
    # Tokens as trained: prompt + completion of both sides, after TRL's own truncation.
    tokens = 0
    for row in trainer.train_dataset.select(range(pairs_per_step * args.warmup, needed)):
        for side in ("chosen", "rejected"):
            tokens += min(args.max_length, len(row["prompt_ids"]) + len(row[f"{side}_ids"]))
    torch.cuda.reset_peak_memory_stats()
    trainer.train()
    elapsed = times[-1] - times[args.warmup - 1] if args.warmup > 0 else times[-1] - times[0]
    steps = args.steps if args.warmup > 0 else args.steps - 1
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    return {
        "engine": "trl-dpo" + ("+peft" if args.mode == "lora" else "") + ("+liger" if args.liger else ""),
        "model_dir": args.model_dir, "mode": args.mode, "pairs_per_s": round(pairs_per_step * steps / elapsed, 3),
        "tokens_per_s": round(tokens / elapsed * steps / args.steps, 1), "step_s": round(elapsed / steps, 3),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "losses": losses,
        "micro_batch": args.micro_batch, "grad_accum": args.grad_accum, "max_length": args.max_length,
        "checkpointing": args.checkpointing, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "transformers": transformers.__version__, "trl": trl.__version__,
        "peft": peft.__version__ if args.mode == "lora" else None,
    }


def main():
    parser = trainer_parser(__doc__, micro_batch=4, grad_accum=2, steps=4, warmup=2)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--liger", action="store_true")
    args = parser.parse_args()
    print_record(run, args, {"engine": "trl-dpo", "mode": args.mode, "liger": args.liger})


if __name__ == "__main__":
    sys.exit(main())
