#!/usr/bin/env python3
"""The long-context peer of bench/model_parallel_rows.sh (issue 25): transformers + PEFT LoRA with
PyTorch's context parallelism (torch.distributed.tensor.experimental.context_parallel: ring
attention over the sequence, load-balanced causal shards), gradient checkpointing, the loss over
the LM head in chunks (no [tokens, vocab] logits held), on 1 (plain) or N GPUs (torchrun).

One sequence per step (micro-batch 1), one long document: ring attention takes no document mask,
so unlike our long-document rows nothing is cut into whole-row documents; the work is the same.
LoRA r16 alpha 32 on every linear projection, dropout 0, AdamW; random token ids, the same on
every rank; LoRA gradients summed over the ranks (each rank's loss is its share of the mean).

  torchrun --nproc_per_node N bench/peers/hf_context_parallel.py --model DIR --sequences 32768,131072
           [--steps 3] [--time-limit 240]

Prints one JSON line per length (rank 0): tokens/s over the steps after the first, peak memory per
GPU (torch.cuda.max_memory_allocated / reserved), or {"error": ...} (OutOfMemoryError: the length
does not fit). A length is skipped once the time limit is spent.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def patch_transformers():
    # Load-balanced shards hold two pieces of the sequence, so their position ids jump once; recent
    # transformers would read that as packed documents and build a mask, which ring attention does
    # not take. The sequence is one document: no mask, is_causal.
    import transformers.masking_utils as masking
    if hasattr(masking, "find_packed_sequence_indices"):
        masking.find_packed_sequence_indices = lambda *args, **kwargs: None
    # Grouped kv heads expanded (repeat_kv) rather than enable_gqa, which not every SDPA path under
    # context parallelism takes.
    try:
        from transformers.integrations import sdpa_attention
        if hasattr(sdpa_attention, "use_gqa_in_sdpa"):
            sdpa_attention.use_gqa_in_sdpa = lambda *args, **kwargs: False
    except ImportError:
        pass


def chunked_loss(hidden, lm_head, labels, chunk):
    """Σ cross-entropy over the rows of hidden [n, H] against labels [n] (−100 ignored), the logits
    made one chunk at a time and recomputed in the backward."""
    def piece(h, y):
        return F.cross_entropy(lm_head(h).float(), y, ignore_index=-100, reduction="sum")
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, hidden.shape[0], chunk):
        total = total + checkpoint(piece, hidden[start:start + chunk], labels[start:start + chunk], use_reentrant=False)
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--sequences", default="32768")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=240.0)
    parser.add_argument("--loss-chunk", type=int, default=4096)
    args = parser.parse_args()
    started = time.time()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    on_gpu = torch.cuda.is_available()  # the CPU runs one rank only: a smoke test of this script
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    synchronize = (lambda: torch.cuda.synchronize(device)) if on_gpu else (lambda: None)
    if world > 1:
        dist.init_process_group("nccl", device_id=device)

    patch_transformers()
    import transformers
    import peft
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, attn_implementation="sdpa").to(device)
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets,
                                                       task_type="CAUSAL_LM"))
    model.train()  # from_pretrained leaves eval mode, where transformers skips the checkpointing
    causal_lm = model.get_base_model()
    backbone, lm_head = causal_lm.model, causal_lm.lm_head
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-4, fused=on_gpu)
    vocab = causal_lm.config.vocab_size

    context = None
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        mesh = init_device_mesh("cuda", (world,), mesh_dim_names=("cp",))
        context = lambda buffers: context_parallel(mesh, buffers=buffers, buffer_seq_dims=[1] * len(buffers),
                                                   no_restore_buffers=set(buffers))

    def step(sequence, seed):
        generator = torch.Generator(device=device).manual_seed(seed)  # the same ids on every rank
        ids = torch.randint(0, vocab, (1, sequence), device=device, generator=generator)
        labels = torch.cat([ids[:, 1:], torch.full((1, 1), -100, device=device, dtype=ids.dtype)], dim=1)
        positions = torch.arange(sequence, device=device).unsqueeze(0)
        counted = sequence - 1

        def forward_backward():
            hidden = backbone(input_ids=ids, position_ids=positions).last_hidden_state
            loss = chunked_loss(hidden[0], lm_head, labels[0], args.loss_chunk) / counted
            loss.backward()
            return loss.detach()

        if context is None:
            loss = forward_backward()
        else:
            with context([ids, labels, positions]):
                loss = forward_backward()
            for p in trained:
                dist.all_reduce(p.grad)
            dist.all_reduce(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    for sequence in [int(s) for s in args.sequences.split(",") if s]:
        record = {"engine": "transformers + PEFT, torch context parallel" if world > 1 else "transformers + PEFT",
                  "gpus": world, "sequence_len": sequence, "torch": torch.__version__,
                  "transformers": transformers.__version__, "peft": peft.__version__,
                  "gpu": torch.cuda.get_device_name(device) if on_gpu else "cpu"}
        if time.time() - started > args.time_limit:
            record["error"] = "skipped: time limit"
        else:
            if on_gpu:
                torch.cuda.reset_peak_memory_stats(device)
            try:
                seconds, losses = [], []
                for s in range(args.steps):
                    synchronize()
                    if world > 1:
                        dist.barrier()
                    begin = time.perf_counter()
                    losses.append(step(sequence, 1000 + s))
                    synchronize()
                    seconds.append(time.perf_counter() - begin)
                    if time.time() - started > args.time_limit:
                        break
                timed = seconds[1:] or seconds
                record.update(tokens_per_s=sequence * len(timed) / sum(timed), step_seconds=seconds, losses=losses)
            except torch.OutOfMemoryError as error:
                record["error"] = "OutOfMemoryError: " + str(error).splitlines()[0][:200]
                optimizer.zero_grad(set_to_none=True)
            peak = torch.tensor([torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)]
                                if on_gpu else [0.0, 0.0], device=device, dtype=torch.float64)
            if world > 1:
                dist.all_reduce(peak, op=dist.ReduceOp.MAX)
            record["peak_allocated_gib"] = round(float(peak[0]) / 2**30, 2)
            record["peak_reserved_gib"] = round(float(peak[1]) / 2**30, 2)
            if on_gpu:
                torch.cuda.empty_cache()
        if rank == 0:
            print(json.dumps(record), flush=True)
        if "error" in record and "OutOfMemory" in record["error"]:
            break  # longer lengths do not fit either
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
