#!/usr/bin/env python3
"""bench/run_grpo_job.sh's reader of `surogate grpo`'s log, and its table.

  surogate_record.py LOG.jsonl --model M --mode lora [--recipe fp8_hybrid] --completions-per-step N [--warmup 1] [--memory mem.txt]
                     [--output run.log] [--dry-run dryrun.txt]
      prints one JSON record: completions/s over the steps after the warm-up (completions per step ×
      steps / their step_seconds), the medians of the whole step and of its split (the step
      records' generation_seconds, reward_seconds, training_seconds: docs/grpo.md#records), the
      mean completion length and generated tokens/s, peak memory (the nvidia-smi samples, MiB),
      the predicted peak of the run's plan (its output) and of the dry run.
  surogate_record.py --table OURS.jsonl PEERS.jsonl
      prints a markdown table, ours beside the peer's with the ratios, and one JSON line of the
      ratios per model.
"""
import argparse
import json
import os
import re
import statistics


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.startswith("{")]


def peak_gib(path):
    if not path or not os.path.exists(path):
        return None
    mem = [float(x) for x in open(path).read().split() if x.replace(".", "").isdigit()]
    return max(mem) / 1024 if mem else None


def predicted_peak(path):
    """The first "predicted peak N GiB|MiB" of a run's or dry run's output, in GiB."""
    if not path or not os.path.exists(path):
        return None
    match = re.search(r"predicted peak\s+([0-9.]+) (GiB|MiB)", open(path).read())
    return float(match.group(1)) / (1024 if match.group(2) == "MiB" else 1) if match else None


def record(args):
    records = read_jsonl(args.log)
    steps = [r for r in records if r.get("type") == "step"]
    startup = next((r for r in records if r.get("type") == "startup"), {})
    timed = steps[args.warmup:] or steps
    if not timed:
        return {"engine": "surogate grpo", "model": args.model, "mode": args.mode, "error": f"no step records in {args.log}"}
    seconds = sum(r["step_seconds"] for r in timed)
    lengths = [r["completions/mean_length"] for r in timed]
    tokens = sum(r["generated_tokens"] for r in timed)
    return {
        "engine": "surogate grpo", "model": args.model, "mode": args.mode, "recipe": args.recipe, "gpus": args.gpus,
        "completions_per_s": args.completions_per_step * len(timed) / seconds, "completion_tokens_per_s": tokens / seconds,
        "step_s": statistics.median(r["step_seconds"] for r in timed),
        "generation_s": statistics.median(r["generation_seconds"] for r in timed),
        "reward_s": statistics.median(r["reward_seconds"] for r in timed),
        "training_s": statistics.median(r["training_seconds"] for r in timed),
        "completions_mean_length": statistics.mean(lengths), "timed_steps": len(timed),
        "completions_per_step": args.completions_per_step, "peak_mem_gib": peak_gib(args.memory),
        "predicted_peak_gib": predicted_peak(args.output), "dry_run_predicted_peak_gib": predicted_peak(args.dry_run),
        "losses": [r.get("loss") for r in steps], "rewards": [r.get("reward") for r in steps],
        "metrics": {k: v for k, v in steps[-1].items() if "/" in k}, "startup": startup,
    }


def table(ours_path, peers_path):
    ours, peers = read_jsonl(ours_path), read_jsonl(peers_path)
    print("| model | mode | surogate completions/s | step s (gen / reward / train) | peak GiB | peer | "
          "peer completions/s | peer step s (gen / reward / train) | peer peak GiB | ratio |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    ratios = []
    for r in ours:
        if "completions_per_s" not in r:
            continue
        # A peer runs on one GPU: a run on several is shown without a ratio.
        best = max((p for p in peers if p.get("model") == r["model"] and p.get("mode") == r["mode"]
                    and "completions_per_s" in p and r.get("gpus", 1) == 1), key=lambda p: p["completions_per_s"], default=None)
        split = f"{r['step_s']:.1f} ({r['generation_s']:.1f} / {r['reward_s']:.2f} / {r['training_s']:.1f})"
        mem = f"{r['peak_mem_gib']:.1f}" if r.get("peak_mem_gib") is not None else "—"
        if best:
            peer_mem = best.get("peak_mem_gib_smi") or best.get("peak_mem_gib")
            ratio = r["completions_per_s"] / best["completions_per_s"]
            ratios.append({"model": r["model"], "mode": r["mode"], "recipe": r.get("recipe", "bf16"), "completions_per_s_ratio": ratio,
                           "step_s_ratio": best["step_s"] / r["step_s"],
                           "generation_s_ratio": best["generation_s"] / max(r["generation_s"], 1e-9),
                           "training_s_ratio": best["training_s"] / max(r["training_s"], 1e-9)})
            peer = (f"{best['engine']} | {best['completions_per_s']:.2f} | {best['step_s']:.1f} "
                    f"({best['generation_s']:.1f} / {best['reward_s']:.2f} / {best['training_s']:.1f}) | "
                    + (f"{peer_mem:.1f}" if peer_mem is not None else "—") + f" | {ratio:.2f}x |")
        else:
            peer = "— | — | — | — | — |"
        mode = r["mode"] + (f" ({r['recipe']})" if r.get("recipe", "bf16") != "bf16" else "")
        mode += f" × {r['gpus']} GPUs" if r.get("gpus", 1) > 1 else ""
        print(f"| {r['model']} | {mode} | {r['completions_per_s']:.2f} | {split} | {mem} | " + peer)
    for ratio in ratios:
        print(json.dumps(ratio))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--mode")
    parser.add_argument("--recipe", default="bf16", help="the run's `recipe` (the peer runs bf16)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--completions-per-step", type=int, help="per_device_train_batch_size × gradient_accumulation_steps")
    parser.add_argument("--gpus", type=int, default=1, help="data-parallel GPUs (completions per step counts them all)")
    parser.add_argument("--memory")
    parser.add_argument("--output", help="the run's console output (its plan's predicted peak)")
    parser.add_argument("--dry-run", help="the --dry-run output (its predicted peak)")
    args = parser.parse_args()
    if args.table:
        table(*args.paths)
        return
    args.log = args.paths[0]
    print(json.dumps(record(args)))


if __name__ == "__main__":
    main()
