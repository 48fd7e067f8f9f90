#!/usr/bin/env python3
"""Checks that Surogate's training outputs load in the Hugging Face ecosystem and compute the same
loss there (run on a machine with torch, transformers and peft; no internet needed).

  python3 scripts/verify_outputs_hf.py [--surogate build/surogate] [--work /tmp/surogate-verify]

Steps, all on the quickstart task (examples/quickstart/make_example.py):
  1. `surogate sft` full fine-tuning from scratch (lora: false)          -> WORK/full   (HF folder)
  2. `surogate sft` LoRA on that model, merge_adapter: true             -> WORK/lora   (PEFT adapter)
                                                                           WORK/lora/merged (HF folder)
  3. `surogate merge` of the same adapter                               -> WORK/merged (HF folder)
  4. held-out examples tokenized once (input_ids + labels, prompt masked) -> WORK/eval.jsonl
  5. mean next-token loss over the scored tokens, compared in fp32:
       transformers AutoModelForCausalLM(WORK/full)               vs `surogate eval --model WORK/full`
       peft PeftModel(AutoModelForCausalLM(WORK/full), WORK/lora) vs `surogate eval --model WORK/lora/merged`
       transformers AutoModelForCausalLM(WORK/merged)             vs the peft number
     and AutoTokenizer(WORK/full) encodes the prompts to the same ids Surogate trained on.
Tolerance: |difference| <= 1e-4 nats on a mean loss of ~1-3 nats (fp32 everywhere; the remaining
difference is summation order: attention, matmul blocking, LoRA unmerged vs merged).
Exit code 0 when every check passes; one line per check either way.
"""
import argparse
import json
import pathlib
import subprocess
import sys

TOLERANCE = 1e-4
REPO = pathlib.Path(__file__).resolve().parents[1]


def run(*args):
    print("+", " ".join(map(str, args)), flush=True)
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def write_config(path, model, out, extra):
    ex = path.parent / "ex"
    path.write_text(f"""model: {model}
output_dir: {out}
sequence_len: 64
use_chat_template: false
optimizer: adamw
learning_rate: 5e-3
warmup_steps: 10
per_device_train_batch_size: 16
save_steps: 1000
eval_steps: 1000
datasets:
  - path: {ex / 'train.jsonl'}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
{extra}""")
    return path


def tokenized_eval_rows(ex, count=64):
    vocab = json.loads((ex / "model" / "tokenizer.json").read_text())["model"]["vocab"]
    rows = []
    for line in (ex / "valid.jsonl").read_text().splitlines()[:count]:
        row = json.loads(line)
        prompt = [vocab["<s>"]] + [vocab[c] for c in f"reverse: {row['instruction']} = "]
        answer = [vocab[c] for c in row["output"]] + [vocab["</s>"]]
        rows.append({"input_ids": prompt + answer, "labels": [-100] * len(prompt) + answer,
                     "text": f"reverse: {row['instruction']} = {row['output']}"})
    return rows


def surogate_eval(binary, model, data):
    line = run(binary, "eval", "--model", model, "--data", data).strip().splitlines()[-1]
    return json.loads(line)["loss"]


def torch_loss(model, rows):
    import torch
    total, tokens = 0.0, 0
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row["input_ids"]])
            labels = torch.tensor([row["labels"]])
            logits = model(input_ids=ids).logits.float()
            shift_logits, shift_labels = logits[0, :-1], labels[0, 1:]
            losses = torch.nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=-100, reduction="sum")
            total += losses.item()
            tokens += int((shift_labels != -100).sum())
    return total / tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surogate", default=str(REPO / "build" / "surogate"))
    parser.add_argument("--work", default="/tmp/surogate-verify-hf")
    parser.add_argument("--steps", type=int, default=150, help="optimizer steps of each training run")
    args = parser.parse_args()
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    work = pathlib.Path(args.work)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    ex = work / "ex"
    run(sys.executable, REPO / "examples/quickstart/make_example.py", ex)
    run(args.surogate, "sft", write_config(work / "full.yaml", ex / "model", work / "full",
                                           "lora: false\ninit_projections_to_zero: false\n"), f"--max_steps={args.steps}")
    run(args.surogate, "sft", write_config(work / "lora.yaml", work / "full", work / "lora",
                                           "lora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.05\n"
                                           "merge_adapter: true\n"), f"--max_steps={args.steps}")
    run(args.surogate, "merge", "--model", work / "full", "--adapter", work / "lora", "--output", work / "merged")

    rows = tokenized_eval_rows(ex)
    data = work / "eval.jsonl"
    data.write_text("".join(json.dumps({"input_ids": r["input_ids"], "labels": r["labels"]}) + "\n" for r in rows))

    failures = 0

    def check(name, ours, theirs):
        nonlocal failures
        ok = abs(ours - theirs) <= TOLERANCE
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: surogate {ours:.6f} vs HF {theirs:.6f} "
              f"(|diff| {abs(ours - theirs):.2e}, tolerance {TOLERANCE:g})", flush=True)

    tokenizer = AutoTokenizer.from_pretrained(work / "full")
    same_ids = all(tokenizer(r["text"])["input_ids"] == r["input_ids"][:len(tokenizer(r["text"])["input_ids"])]
                   for r in rows)
    print(f"{'PASS' if same_ids else 'FAIL'} AutoTokenizer(full) encodes the prompts to Surogate's ids", flush=True)
    failures += not same_ids

    full = AutoModelForCausalLM.from_pretrained(work / "full", torch_dtype=torch.float32).eval()
    check("full fine-tuning (transformers)", surogate_eval(args.surogate, work / "full", data), torch_loss(full, rows))

    base = AutoModelForCausalLM.from_pretrained(work / "full", torch_dtype=torch.float32)
    peft_model = PeftModel.from_pretrained(base, work / "lora").eval()
    peft_loss = torch_loss(peft_model, rows)
    check("LoRA adapter (peft) vs surogate eval of merge_adapter output",
          surogate_eval(args.surogate, work / "lora" / "merged", data), peft_loss)
    merged = AutoModelForCausalLM.from_pretrained(work / "merged", torch_dtype=torch.float32).eval()
    check("surogate merge output (transformers) vs peft", torch_loss(merged, rows), peft_loss)
    print("all checks passed" if failures == 0 else f"{failures} check(s) failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
