#!/usr/bin/env python3
"""The vision-language peer of bench/run_vl_job.sh: transformers' Qwen2_5_VLForConditionalGeneration
/ Qwen3VLForConditionalGeneration (from the folder's config.json) + PEFT LoRA on the same rows.

- The model: `from_pretrained` on the bench folder, bf16 on the GPU (fp32 on the CPU), attention
  flash_attention_2 when flash-attn is importable, else SDPA; gradient checkpointing off unless
  --checkpointing (the job retries with it after an out-of-memory).
- LoRA rank r (alpha 2r, dropout 0) on the text model's q/k/v/o/gate/up/down projections, as
  Surogate's all-linear on a VL folder; the vision tower, its merger(s) and the LM head frozen
  (PEFT freezes every base weight, and no adapter name matches `visual`).
- The rows: the dataset's rows in a seeded shuffle, each formatted as transformers' processor does
  (the folder's chat template, the HF image processor at the job's max_pixels, each
  `<|image_pad|>` repeated grid_h · grid_w / merge² times), labels on the assistant turn only.
  A micro-batch is --micro-batch rows right-padded to its longest row (attention mask, labels
  -100 on padding), as transformers' collators do. Everything is formatted before the timed steps
  (the processor's CPU time is not charged to the peer); each micro-batch moves to the GPU in the step.
- A step: --grad-accum micro-batches (loss / accum, backward), gradient clipping at 1.0, fused
  AdamW (lr 1e-4). --warmup steps untimed, then --steps timed.

Prints one JSON record: tokens/s (real tokens: the attention mask's), images/s, the step's
seconds, peak memory (torch's max_memory_allocated over the timed steps), the padding efficiency
(real tokens / padded slots) and the mean tokens of an image row over every row it trained (warm-up
included), which the job sets beside Surogate's mean over its training split.
An out-of-memory prints {"error": "OutOfMemoryError ..."} instead.

  python3 bench/vision/hf_vl_peft_bench.py --model-dir DIR --data rows.jsonl --max-pixels 1003520
"""
import argparse
import inspect
import json
import os
import pathlib
import random
import sys
import time

# The text projections, anywhere but the tower (whose Qwen2.5-VL MLP shares gate/up/down's names).
TARGETS = r"^(?!.*visual).*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$"
IMAGE_PAD = "<|image_pad|>"
ASSISTANT = "<|im_start|>assistant\n"


def image_processor(folder: pathlib.Path, max_pixels: int):
    """The folder's HF image processor (the slow, Pillow one where transformers has it) at max_pixels."""
    settings = json.loads((folder / "preprocessor_config.json").read_text())
    min_pixels = settings.get("size", {}).get("shortest_edge", settings.get("min_pixels", 3136))
    for key in ("image_processor_type", "processor_class", "size", "min_pixels", "max_pixels"):
        settings.pop(key, None)
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil as Processor
    except ImportError:
        from transformers import Qwen2VLImageProcessor as Processor
    return Processor(**settings, min_pixels=min_pixels, max_pixels=max_pixels)


def format_rows(rows, base: pathlib.Path, tokenizer, processor):
    """Each row as transformers' Qwen-VL processor makes it: ids, labels, pixel_values, grids."""
    import PIL.Image
    import PIL.ImageOps
    import torch
    merge = processor.merge_size
    header = tokenizer(ASSISTANT, add_special_tokens=False)["input_ids"]
    samples = []
    for row in rows:
        messages = row["messages"]
        paths = [part["image"] for m in messages if isinstance(m["content"], list)
                 for part in m["content"] if part.get("type") == "image"]
        images = [PIL.ImageOps.exif_transpose(PIL.Image.open(base / p)).convert("RGB") for p in paths]
        vision = processor(images=images, return_tensors="pt")
        grids = vision["image_grid_thw"]
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        pieces = text.split(IMAGE_PAD)
        if len(pieces) != len(paths) + 1:
            sys.exit(f"hf_vl_peft_bench.py: a row's template gave {len(pieces) - 1} image pads for {len(paths)} images")
        text = pieces[0] + "".join(IMAGE_PAD * (int(g.prod()) // merge ** 2) + piece
                                   for g, piece in zip(grids, pieces[1:]))
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        # The loss on the assistant turn: everything up to the last assistant header is -100.
        start = max(i for i in range(len(ids) - len(header) + 1) if ids[i:i + len(header)] == header) + len(header)
        labels = [-100] * start + ids[start:]
        samples.append({"ids": torch.tensor(ids), "labels": torch.tensor(labels),
                        "pixel_values": vision["pixel_values"], "grids": grids, "images": len(paths)})
    return samples


def collate(samples, pad_id: int, image_token_id: int, pin: bool):
    import torch
    longest = max(len(s["ids"]) for s in samples)
    ids = torch.full((len(samples), longest), pad_id, dtype=torch.long)
    labels = torch.full((len(samples), longest), -100, dtype=torch.long)
    mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for row, sample in enumerate(samples):
        n = len(sample["ids"])
        ids[row, :n], labels[row, :n], mask[row, :n] = sample["ids"], sample["labels"], 1
    batch = {"input_ids": ids, "labels": labels, "attention_mask": mask,
             "pixel_values": torch.cat([s["pixel_values"] for s in samples]),
             "image_grid_thw": torch.cat([s["grids"] for s in samples]),
             "mm_token_type_ids": (ids == image_token_id).to(torch.int32)}
    if pin:
        batch = {k: v.pin_memory() for k, v in batch.items()}
    return batch, {"tokens": int(mask.sum()), "slots": mask.numel(), "images": sum(s["images"] for s in samples)}


def build_model(folder: pathlib.Path, device: str, rank: int, checkpointing: bool):
    import peft
    import torch
    import transformers
    architecture = json.loads((folder / "config.json").read_text())["architectures"][0]
    model_class = getattr(transformers, architecture)
    attention = "sdpa"
    if device == "cuda":
        try:
            import flash_attn  # noqa: F401
            attention = "flash_attention_2"
        except ImportError:
            pass
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    try:  # straight onto the device (device_map needs accelerate on some transformers versions)
        model = model_class.from_pretrained(folder, dtype=dtype, attn_implementation=attention, device_map=device)
    except ImportError:
        model = model_class.from_pretrained(folder, dtype=dtype, attn_implementation=attention).to(device)
    if checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    adapted = {name.rsplit(".lora_A", 1)[0] for name, _ in model.named_parameters() if ".lora_A" in name}
    layers = model.config.get_text_config().num_hidden_layers
    if len(adapted) != 7 * layers or any("visual" in name for name in adapted):
        sys.exit(f"hf_vl_peft_bench.py: {len(adapted)} adapted modules, expected 7 × {layers} text projections")
    return model, architecture, attention


def run(args) -> dict:
    import torch
    import transformers
    folder = pathlib.Path(args.model_dir)
    rows = [json.loads(line) for line in open(args.data) if line.strip()]
    random.Random(args.seed).shuffle(rows)
    per_step = args.micro_batch * args.grad_accum
    needed = per_step * (args.warmup + args.steps)
    rows = (rows * (needed // len(rows) + 1))[:needed]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    processor = image_processor(folder, args.max_pixels)
    config = json.loads((folder / "config.json").read_text())
    image_token_id = config.get("image_token_id", 151655)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    started = time.perf_counter()
    samples = format_rows(rows, pathlib.Path(args.data).parent, tokenizer, processor)
    batches = [collate(samples[i:i + args.micro_batch], pad_id, image_token_id, args.device == "cuda")
               for i in range(0, len(samples), args.micro_batch)]
    format_s = time.perf_counter() - started
    model, architecture, attention = build_model(folder, args.device, args.lora_rank, args.checkpointing)
    accepts = inspect.signature(model.get_base_model().forward).parameters
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, fused=args.device == "cuda")
    cuda = args.device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    step_seconds, counts = [], []

    def step(index):
        total = {"tokens": 0, "slots": 0, "images": 0}
        for micro in range(args.grad_accum):
            batch, count = batches[index * args.grad_accum + micro]
            inputs = {k: v.to(args.device, non_blocking=True) for k, v in batch.items() if k in accepts}
            inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
            out = model(**inputs)
            (out.loss / args.grad_accum).backward()
            total = {k: total[k] + count[k] for k in total}
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total

    for index in range(args.warmup):
        step(index)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for index in range(args.warmup, args.warmup + args.steps):
        start = time.perf_counter()
        counts.append(step(index))
        if cuda:
            torch.cuda.synchronize()
        step_seconds.append(time.perf_counter() - start)
    seconds = sum(step_seconds)
    tokens, slots, images = (sum(c[k] for c in counts) for k in ("tokens", "slots", "images"))
    return {
        "engine": "hf+peft", "model": args.model_name or folder.name, "mode": "lora", "architecture": architecture,
        "tokens_per_s": round(tokens / seconds, 1), "images_per_s": images / seconds,
        "step_s": round(seconds / len(step_seconds), 3), "step_seconds": [round(s, 3) for s in step_seconds],
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "timed_tokens": tokens, "timed_images": images, "padding_efficiency": round(tokens / slots, 3),
        # Over every row the peer trained (warm-up included), as Surogate's over its split.
        "tokens_per_image_row": round(sum(len(s["ids"]) for s in samples) / sum(s["images"] for s in samples), 1),
        "rows_per_step": per_step, "micro_batch": args.micro_batch, "grad_accum": args.grad_accum,
        "steps": args.steps, "warmup": args.warmup, "max_pixels": args.max_pixels, "lora_rank": args.lora_rank,
        "attention": attention, "checkpointing": args.checkpointing, "format_s": round(format_s, 1),
        "gpu": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
        "transformers": transformers.__version__, "peft": __import__("peft").__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--model-name", help="the record's model (default: the folder's name)")
    parser.add_argument("--data", required=True)
    parser.add_argument("--max-pixels", type=int, default=1003520)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    try:
        record = run(args)
    except Exception as error:  # noqa: BLE001  the job reads the line (and retries an out-of-memory)
        if type(error).__name__ != "OutOfMemoryError":
            raise
        record = {"engine": "hf+peft", "model": args.model_name, "error": f"OutOfMemoryError: {error}"[:300]}
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
