"""The peer benchmark: the same job in Hugging Face transformers (+ PEFT for LoRA), on the GPU.

Runs on the GPU machine (PyTorch, transformers, peft installed there). Random weights, real
Qwen3 shapes, bf16, SDPA attention, gradient checkpointing off unless --checkpointing; random
token rows of full length stand in for packed data. Prints one JSON record per run.
Optionally applies Liger-Kernel's fused ops (--liger) when its wheel was carried. --qlora: the
QLoRA peer, transformers + PEFT + bitsandbytes: every decoder projection becomes a bitsandbytes
Linear4bit (NF4, blocks of 64, double quantization, bf16 compute, as `BitsAndBytesConfig(
load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True)` loads it), the
embeddings, norms and LM head stay bf16, LoRA on all-linear; needs the bitsandbytes wheel.

  python3 bench/peers/hf_peft_bench.py --model qwen3-0.6b --mode lora --steps 6

Under torchrun (WORLD_SIZE > 1: `torchrun --nproc_per_node 2 bench/peers/hf_peft_bench.py ...`)
the model is wrapped in DistributedDataParallel (NCCL, one process per GPU, gradient sync on the
last micro-batch of each step); each rank reads its own random rows, the record (rank 0's) gives
tokens/s over all GPUs and per GPU, and the peak memory of rank 0's GPU.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from models import MODELS  # noqa: E402


def quantize_nf4(model):
    """Every nn.Linear of the decoder layers (not the LM head) replaced by bitsandbytes' NF4
    Linear4bit holding the same weights, quantized on the GPU; the bf16 copies are freed."""
    import bitsandbytes as bnb
    import torch
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if not isinstance(child, torch.nn.Linear) or "layers." not in f"{name}.{child_name}":
                continue
            quantized = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                          compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4",
                                          device="meta")
            quantized.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False,
                                                 compress_statistics=True, quant_type="nf4", blocksize=64).to("cuda")
            if child.bias is not None:
                quantized.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(module, child_name, quantized)
            del child
    torch.cuda.empty_cache()
    return model


def build_model(shape, mode, lora_rank, liger, qlora=False):
    import torch
    import transformers
    if liger:
        from liger_kernel.transformers import apply_liger_kernel_to_qwen3
        apply_liger_kernel_to_qwen3()
    settings = {k: v for k, v in shape.hf_config().items() if k not in ("architectures", "torch_dtype")}
    config = transformers.AutoConfig.for_model(settings.pop("model_type"), **settings)
    config._attn_implementation = "sdpa"
    moe = config.model_type == "qwen3_moe"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    if qlora:
        model = quantize_nf4(model)
    if mode == "lora":
        import peft
        # MoE: transformers 5 keeps the experts as 3-D parameters, which PEFT adapts through
        # target_parameters (one adapter per expert); attention through its modules, as Surogate's
        # all-linear (attention + experts, not the router).
        targets = ["q_proj", "k_proj", "v_proj", "o_proj"] if moe else "all-linear"
        extra = {"target_parameters": ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]} if moe else {}
        lora = peft.LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0, target_modules=targets,
                               task_type="CAUSAL_LM", **extra)
        model = peft.get_peft_model(model, lora)
    return model


def run(args, world, rank):
    import contextlib
    import torch
    shape = MODELS[args.model]
    model = build_model(shape, args.mode, args.lora_rank, args.liger, args.qlora)
    if args.checkpointing:
        model.gradient_checkpointing_enable()
        if args.mode == "lora":
            model.enable_input_require_grads()
    params = [p for p in model.parameters() if p.requires_grad]
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    optimizer = torch.optim.AdamW(params, lr=1e-4, fused=True)
    tokens_per_step = args.micro_batch * args.seq_len * args.grad_accum * world
    generator = torch.Generator(device="cuda").manual_seed(1 + rank)

    def step():
        for micro in range(args.grad_accum):
            ids = torch.randint(0, shape.vocab, (args.micro_batch, args.seq_len), device="cuda", generator=generator)
            # DDP: gradients are all-reduced on the window's last micro-batch only.
            sync = world == 1 or micro == args.grad_accum - 1
            with contextlib.nullcontext() if sync else model.no_sync():
                out = model(input_ids=ids, labels=ids)
                (out.loss / args.grad_accum).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tokens_per_s = tokens_per_step * args.steps / elapsed
    flops = shape.training_flops_per_token(args.seq_len, args.mode, args.lora_rank) * tokens_per_s
    return {
        "engine": ("hf+peft" + ("+bnb-nf4" if args.qlora else "") + ("+liger" if args.liger else "") if args.mode == "lora"
                   else "hf" + ("+liger" if args.liger else "")),
        "model": args.model, "mode": args.mode, "tokens_per_s": round(tokens_per_s, 1),
        "tflops": round(flops / 1e12, 2), "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "gpus": world, "tokens_per_s_per_gpu": round(tokens_per_s / world, 1),
        "seq_len": args.seq_len, "micro_batch": args.micro_batch, "grad_accum": args.grad_accum,
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "peft": __import__("peft").__version__ if args.mode == "lora" else None,
        "bitsandbytes": __import__("bitsandbytes").__version__ if args.qlora else None,
        "checkpointing": args.checkpointing,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--mode", choices=["lora", "full"], default="lora")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--grad-accum", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--liger", action="store_true")
    parser.add_argument("--qlora", action="store_true", help="NF4 base through bitsandbytes (LoRA only)")
    args = parser.parse_args()
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world > 1:
        import torch
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.distributed.init_process_group("nccl")
    try:
        record = run(args, world, rank)
    except Exception as error:  # an out-of-memory is a result too
        record = {"engine": "hf+peft", "model": args.model, "mode": args.mode, "gpus": world,
                  "error": f"{type(error).__name__}: {error}"[:300]}
    if rank == 0:
        print(json.dumps(record), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
