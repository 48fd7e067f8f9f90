#!/usr/bin/env python3
"""Loss curves of surogate (CUDA, bf16 recipe) against transformers + PEFT on the same job.

Runs a LoRA job and a full fine-tune (default 200 optimizer steps each) of a small random-weight
Llama on fixed generated data, once in surogate and once in PyTorch (transformers, PEFT for
LoRA; bf16 autocast over fp32 master weights, torch.optim.AdamW, the same global-norm clipping),
and checks that the two loss curves track.

Same job on both sides:
  - init weights: the HF model is created here (seeded) and saved as the surogate model folder;
    LoRA adapters: surogate's own initialisation, exported by a surogate run at learning rate
    1e-30 for one step (a PEFT adapter folder) and loaded by PEFT, so A matches and B = 0;
  - data: 16 documents of a random sparse Markov chain over 60 characters, each exactly
    sequence_len tokens (<s> + 126 characters + </s>, one document per row, no padding); every
    optimizer step sees all 16 rows (2 micro-batches of 8), so the data order inside a step
    cannot matter: both sides compute the same window mean;
  - LR: taken per step from surogate's JSONL log (cosine, 20 warm-up steps) and set in torch;
  - AdamW betas (0.9, 0.999), eps 1e-8, weight decay 0.01 except norms and biases, clip 1.0.

Tolerance: mean |loss_surogate − loss_torch| over the last 50 steps < 0.05 nats, and at every
step < 0.25 nats. Both sides round to bf16 in different places (surogate: bf16 weights and
activations everywhere; torch autocast: bf16 matmuls, fp32 norms and softmax), so the curves
differ by bf16 noise that AdamW's normalised updates keep from vanishing; a wrong gradient,
optimizer step, schedule or clipping shows up as a difference of the order of the loss drop
itself (1+ nats over these runs).

Usage (on the GPU machine; torch, transformers, peft installed; no network needed):
  python3 scripts/compare_training_curves.py --surogate ./surogate [--steps 200] [--work DIR]
Exit status 0 when both modes are within tolerance.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SEQUENCE = 128
ROWS = 16
MICRO_BATCH = 8
ACCUMULATION = ROWS // MICRO_BATCH
LAST = 50
MEAN_TOLERANCE = 0.05
STEP_TOLERANCE = 0.25
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]
CHARACTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("01234567")


def write_tokenizer(folder: Path) -> dict:
    vocab = {token: index for index, token in enumerate(SPECIAL)}
    for character in CHARACTERS:
        vocab[character] = len(vocab)
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}}},
        "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
         "model_max_length": SEQUENCE, "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True}))
    return vocab


def make_documents(seed: int = 7) -> list:
    """ROWS strings of SEQUENCE - 2 characters from a fixed random chain (3 successors per character)."""
    rng = random.Random(seed)
    successors = {c: rng.sample(CHARACTERS, 3) for c in CHARACTERS}
    documents = []
    for _ in range(ROWS):
        c = rng.choice(CHARACTERS)
        text = [c]
        while len(text) < SEQUENCE - 2:
            c = rng.choice(successors[c])
            text.append(c)
        documents.append("".join(text))
    return documents


def make_model(folder: Path, vocab_size: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-5,
                         rope_theta=10000.0, max_position_embeddings=SEQUENCE, tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, hidden_act="silu")
    model = LlamaForCausalLM(config).float()
    model.save_pretrained(folder, safe_serialization=True)


def surogate_config(work: Path, name: str, steps: int, lora: bool, learning_rate: float) -> Path:
    lines = [
        f"model: {work / 'model'}", f"output_dir: {work / name}", f"log_file: {work / name / 'log.jsonl'}",
        f"sequence_len: {SEQUENCE}", f"lora: {'true' if lora else 'false'}", "use_chat_template: false",
        "optimizer: adamw", f"learning_rate: {learning_rate}", "lr_scheduler_type: cosine", f"warmup_steps: {min(20, steps - 1)}",
        "weight_decay: 0.01", "max_grad_norm: 1.0", "adamw_beta1: 0.9", "adamw_beta2: 0.999", "adamw_epsilon: 1e-8",
        f"per_device_train_batch_size: {MICRO_BATCH}", f"gradient_accumulation_steps: {ACCUMULATION}",
        f"max_steps: {steps}", "validation_split_ratio: 0.0", "eval_steps: 100000", "save_steps: 100000", "train_seed: 42",
        "datasets:", f"  - path: {work / 'train.jsonl'}", "    type: text",
    ]
    if lora:
        lines[5:5] = ["lora_rank: 16", "lora_alpha: 32", "lora_dropout: 0.0", "lora_target_modules: all-linear"]
    path = work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_surogate(binary: str, config: Path, log: Path) -> list:
    start = time.time()
    result = subprocess.run([binary, "sft", str(config)], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"surogate failed ({config}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    for line in result.stdout.splitlines():
        if "backend" in line:
            print("  surogate:", line.strip())
    records = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [r for r in records if r.get("type") == "step"]
    print(f"  surogate: {len(steps)} steps in {time.time() - start:.1f} s")
    return steps


def torch_losses(work: Path, documents: list, vocab: dict, learning_rates: list, lora_dir) -> list:
    import torch
    from transformers import LlamaForCausalLM
    device = "cuda"
    model = LlamaForCausalLM.from_pretrained(work / "model", torch_dtype=torch.float32, attn_implementation="sdpa").to(device)
    if lora_dir is not None:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, lora_dir, is_trainable=True)
    model.train()
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if ("norm" in name or name.endswith(".bias")) else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=learning_rates[0], betas=(0.9, 0.999), eps=1e-8)
    ids = torch.tensor([[vocab["<s>"]] + [vocab[c] for c in d] + [vocab["</s>"]] for d in documents], device=device)
    labels = ids.clone()
    labels[:, 0] = -100  # a document's first token is never predicted (shifted away anyway)
    loss_tokens = ROWS * (SEQUENCE - 1)
    losses = []
    for learning_rate in learning_rates:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate
        total = 0.0
        for micro in range(ACCUMULATION):
            rows = slice(micro * MICRO_BATCH, (micro + 1) * MICRO_BATCH)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=ids[rows]).logits.float()
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     labels[rows, 1:].reshape(-1), ignore_index=-100,
                                                     reduction="sum") / loss_tokens
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
    return losses


def compare(name: str, ours: list, theirs: list) -> bool:
    deltas = [abs(a - b) for a, b in zip(ours, theirs)]
    last = deltas[-LAST:]
    mean_last = sum(last) / len(last)
    print(f"\n{name}: step   surogate   torch     |delta|")
    for i in sorted({0, 1, 4, 9, 19, 49, 99, 149, len(ours) - 1}):
        if i < len(ours):
            print(f"{name}: {i + 1:4d}   {ours[i]:.4f}    {theirs[i]:.4f}    {deltas[i]:.4f}")
    ok = mean_last < MEAN_TOLERANCE and max(deltas) < STEP_TOLERANCE
    print(f"{name}: mean |delta| over the last {LAST} steps {mean_last:.4f} (tolerance {MEAN_TOLERANCE}), "
          f"max |delta| {max(deltas):.4f} at step {deltas.index(max(deltas)) + 1} (tolerance {STEP_TOLERANCE}): "
          f"{'OK' if ok else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--surogate", required=True, help="path of the surogate binary (a CUDA build)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--work", default="/tmp/surogate-curves")
    parser.add_argument("--modes", default="lora,full")
    args = parser.parse_args()
    work = Path(args.work)
    (work / "model").mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(work / "model")
    documents = make_documents()
    with open(work / "train.jsonl", "w") as out:
        for document in documents:
            out.write(json.dumps({"text": document}) + "\n")
    make_model(work / "model", vocab_size=128)
    results = {}
    for mode in args.modes.split(","):
        lora = mode == "lora"
        learning_rate = 2e-3 if lora else 1e-3
        print(f"== {mode}: {args.steps} steps, lr {learning_rate} (cosine, 20 warm-up steps)")
        lora_dir = None
        if lora:
            # Export surogate's initial adapters: one step at a negligible learning rate.
            init = surogate_config(work, "lora-init", 1, True, 1e-30)
            run_surogate(args.surogate, init, work / "lora-init" / "log.jsonl")
            lora_dir = work / "lora-init"
        steps = run_surogate(args.surogate, surogate_config(work, mode, args.steps, lora, learning_rate),
                             work / mode / "log.jsonl")
        ours = [s["loss"] for s in steps]
        start = time.time()
        theirs = torch_losses(work, documents, vocab, [s["lr"] for s in steps], lora_dir)
        print(f"  torch: {len(theirs)} steps in {time.time() - start:.1f} s")
        results[mode] = compare(mode, ours, theirs)
        with open(work / f"{mode}-curves.json", "w") as out:
            json.dump({"surogate": ours, "torch": theirs}, out)
    print("\nsummary: " + ", ".join(f"{m} {'OK' if ok else 'FAIL'}" for m, ok in results.items()))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
