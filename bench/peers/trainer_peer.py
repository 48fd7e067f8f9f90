"""What the trainer peers (bench/peers/trl_dpo_bench.py, trl_grpo_bench.py) share: their common
options, the LoRA configuration, and the one JSON record they print, an exception (an out-of-memory is a result too)
becoming the record's "error"."""
import argparse
import json


def trainer_parser(doc, micro_batch, grad_accum, steps, warmup):
    """--model-dir, --data, --mode, --lora-rank, --micro-batch, --grad-accum, --steps, --warmup,
    --checkpointing; the defaults given are the bench's shapes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--mode", choices=["lora", "full"], default="lora")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--micro-batch", type=int, default=micro_batch)
    parser.add_argument("--grad-accum", type=int, default=grad_accum)
    parser.add_argument("--steps", type=int, default=steps, help="timed steps, after the warm-up")
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    return parser


def lora_config(args):
    """PEFT's LoRA on every linear layer (rank --lora-rank, alpha twice it, no dropout: surogate's
    bench settings, bench/mode_yaml.sh), or None for full fine-tuning."""
    if args.mode != "lora":
        return None
    import peft
    return peft.LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.0,
                           target_modules="all-linear", task_type="CAUSAL_LM")


def print_record(run, args, failed):
    """Prints run(args)'s record, or `failed` with the exception's "error"."""
    try:
        record = run(args)
    except Exception as error:  # an out-of-memory is a result too
        record = {**failed, "error": f"{type(error).__name__}: {error}"[:400]}
    print(json.dumps(record), flush=True)
