"""The GRPO peer: TRL's GRPOTrainer (+ PEFT for LoRA) on the same model folder, prompts, rewards
and shapes as `surogate grpo` (bench/run_grpo_job.sh), generating with transformers (no vLLM).

Both: num_generations completions of every prompt, up to --max-completion-length tokens each,
per_device_train_batch_size × gradient_accumulation_steps completions per optimizer step (TRL's
default steps_per_generation = gradient_accumulation_steps: one generation batch per step, one
policy update, no old-policy forward), beta 0 (no reference), loss_type dapo, temperature 1,
top_p 1, top_k 0, AdamW, bf16 weights (fp32 with --device cpu), SDPA attention.
--full-length makes every completion run to max_completion_length: transformers'
min_new_tokens (its logits processor masks the EOS ids until then), as run_grpo_job.sh's model
folder makes `surogate grpo` never meet an EOS; the record's completions_mean_length shows it.

Timing: the steps after --warmup, from the end of the last warm-up step (a callback, after a CUDA
synchronize) to the end of the last step. The split wraps GRPOTrainer's own methods:
generation_s = `_generate` (transformers' generate and the decoding of the texts), reward_s =
`_calculate_rewards`, training_s = the rest of the step. Prints one JSON record (the last line).

  python3 bench/peers/trl_grpo_bench.py --model-dir DIR --data prompts.jsonl --rewards bench/grpo/rewards.py
"""
import functools
import importlib.util
import json
import statistics
import sys
import time

from trainer_peer import lora_config, print_record, trainer_parser


def load_rewards(path, names):
    spec = importlib.util.spec_from_file_location("grpo_bench_rewards", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [getattr(module, name) for name in names]


def timed(trainer, name, seconds, synchronize):
    """Wraps trainer.<name> so that each call adds its wall time to seconds[-1]."""
    original = getattr(trainer, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        synchronize()
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            synchronize()
            seconds[-1] += time.perf_counter() - start

    setattr(trainer, name, wrapper)


def run(args):
    import datasets
    import peft
    import torch
    import transformers
    import trl

    cuda = args.device == "cuda"
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    completions_per_step = args.micro_batch * args.grad_accum
    if completions_per_step % args.num_generations:
        raise SystemExit(f"{completions_per_step} completions per step is not a multiple of {args.num_generations}")
    prompts_per_step = completions_per_step // args.num_generations
    rows = [json.loads(line) for line in open(args.data)]
    needed = prompts_per_step * (args.steps + args.warmup)
    if len(rows) < needed:
        raise SystemExit(f"{args.data}: {len(rows)} prompts, the run needs {needed}")
    dataset = datasets.Dataset.from_list(rows[:needed])
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir, padding_side="left")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.model_dir, dtype=torch.bfloat16 if cuda else torch.float32, attn_implementation="sdpa").to(args.device)
    # The folder's generation_config.json may name an EOS the model cannot emit (run_grpo_job.sh's
    # way of keeping surogate's completions full length); TRL adds the tokenizer's EOS itself.
    model.generation_config.eos_token_id = None
    peft_config = lora_config(args)
    config = trl.GRPOConfig(
        output_dir="/tmp/trl_grpo_out", per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.grad_accum, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, temperature=1.0, top_p=1.0, top_k=0, beta=0.0,
        loss_type="dapo", num_iterations=1, max_steps=args.steps + args.warmup, learning_rate=1e-5,
        bf16=cuda, use_cpu=not cuda, logging_steps=1, report_to=[], save_strategy="no",
        gradient_checkpointing=args.checkpointing, shuffle_dataset=False, dataloader_num_workers=0, seed=0,
        generation_kwargs={"min_new_tokens": args.max_completion_length} if args.full_length else None)
    step_ends, generation, reward = [], [0.0], [0.0]

    class StepTimes(transformers.TrainerCallback):
        def on_step_end(self, *_, **__):
            synchronize()
            step_ends.append(time.perf_counter())
            generation.append(0.0)
            reward.append(0.0)

    trainer = trl.GRPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                              reward_funcs=load_rewards(args.rewards, args.reward_names), peft_config=peft_config,
                              callbacks=[StepTimes()])
    timed(trainer, "_generate", generation, synchronize)
    timed(trainer, "_calculate_rewards", reward, synchronize)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    warmup = max(args.warmup, 1)  # the first step's end is the clock's start when there is no warm-up
    steps = len(step_ends) - warmup
    elapsed = step_ends[-1] - step_ends[warmup - 1]
    step_s = [b - a for a, b in zip(step_ends[warmup - 1:-1], step_ends[warmup:])]
    generation_s = statistics.median(generation[warmup:warmup + steps])
    reward_s = statistics.median(reward[warmup:warmup + steps])
    logs = [r for r in trainer.state.log_history if "loss" in r]
    lengths = [r.get("completions/mean_length") for r in logs]
    mean_length = statistics.mean(lengths[warmup:]) if lengths[warmup:] else None
    return {
        "engine": "trl-grpo" + ("+peft" if args.mode == "lora" else ""), "model_dir": args.model_dir,
        "mode": args.mode, "completions_per_s": completions_per_step * steps / elapsed,
        "completion_tokens_per_s": completions_per_step * mean_length * steps / elapsed if mean_length else None,
        "step_s": statistics.median(step_s), "generation_s": generation_s, "reward_s": reward_s,
        "training_s": statistics.median(step_s) - generation_s - reward_s,
        "completions_mean_length": mean_length,
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "losses": [r["loss"] for r in logs], "rewards": [r.get("reward") for r in logs],
        "num_generations": args.num_generations, "max_completion_length": args.max_completion_length,
        "micro_batch": args.micro_batch, "grad_accum": args.grad_accum, "completions_per_step": completions_per_step,
        "timed_steps": steps, "checkpointing": args.checkpointing, "full_length": args.full_length,
        "gpu": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
        "transformers": transformers.__version__, "trl": trl.__version__,
        "peft": peft.__version__ if args.mode == "lora" else None,
    }


def main():
    parser = trainer_parser(__doc__, micro_batch=16, grad_accum=32, steps=3, warmup=1)
    parser.add_argument("--rewards", required=True, help="the Python file of the reward functions")
    parser.add_argument("--reward-names", nargs="+", default=["correct_answer", "boxed_format"])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=512)
    parser.add_argument("--full-length", action="store_true", help="min_new_tokens = max_completion_length")
    args = parser.parse_args()
    print_record(run, args, {"engine": "trl-grpo", "mode": args.mode})


if __name__ == "__main__":
    sys.exit(main())
