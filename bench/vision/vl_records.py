#!/usr/bin/env python3
"""The records of bench/run_vl_job.sh.

  vl_records.py surogate LOG_JSONL --model M --tokenize-output FILE --dry-run FILE --memory FILE
                [--warmup N] [--gpu NAME] [--settings JSON]
      Surogate's record of one run (printed): tokens/s is the median of the steps' real tokens/s
      after the first --warmup; images/s is tokens/s over the training split's tokens per image
      row (`surogate tokenize`'s report: tokens / documents; every row holds one image), the
      epoch's mean, since the step records count tokens, not images; peak memory nvidia-smi's.
  vl_records.py peer --model M --memory FILE  < the peer's last output line
      The peer's record (printed) with the model's name and nvidia-smi's peak beside torch's
      (peak_mem_gib: max_memory_allocated; peak_mem_gib_smi: as ours is measured); a missing line
      becomes an error record.
  vl_records.py combine OURS_JSON PEER_JSONL
      OURS_JSON's record with the ratios against the peer record of the same model in PEER_JSONL
      (the last one without an error): tokens_per_s_ratio, images_per_s_ratio (printed).
  vl_records.py table VL_JSONL PEERS_JSONL
      The markdown table of the call.
"""
import argparse
import json
import re
import statistics
import sys


def lines(path):
    try:
        return [json.loads(line) for line in open(path) if line.startswith("{")]
    except FileNotFoundError:
        return []


def surogate(args) -> dict:
    records = lines(args.log)
    steps = [r for r in records if r.get("type") == "step"]
    startup = next((r for r in records if "total_seconds" in r), {})
    timed = steps[args.warmup:] or steps
    tokens_per_s = statistics.median(r["tokens_per_second"] for r in timed) if timed else None
    report = open(args.tokenize_output).read()
    packed = re.search(r"train: (\d+) documents packed into (\d+) rows, (\d+) tokens \((\d+) with loss\), "
                       r"packing efficiency ([0-9.]+)%", report)
    documents, rows, tokens = (int(packed.group(i)) for i in (1, 2, 3)) if packed else (None, None, None)
    per_image = tokens / documents if packed and documents else None
    dry_run = open(args.dry_run).read()
    predicted = re.search(r"predicted peak\s+([0-9.]+) (GiB|MiB)", dry_run)
    patches = re.search(r"vision tower planned for (\d+) patches", dry_run)
    record = {"engine": "surogate CLI", "model": args.model, "mode": "lora",
              "tokens_per_s": tokens_per_s,
              "images_per_s": tokens_per_s / per_image if tokens_per_s and per_image else None,
              "step_s": statistics.median(r["step_seconds"] for r in timed) if timed else None,
              "step_tokens_per_s": [r["tokens_per_second"] for r in steps],
              "peak_mem_gib": peak_gib(args.memory),
              "predicted_peak_gib": (float(predicted.group(1)) / (1 if predicted.group(2) == "GiB" else 1024)
                                     if predicted else None),
              "vision_patches_planned": int(patches.group(1)) if patches else None,
              "tokens_per_image_row": round(per_image, 1) if per_image else None,
              "train_documents": documents, "train_rows": rows,
              "packing_efficiency": float(packed.group(5)) / 100 if packed else None,
              "steps": len(steps), "warmup": args.warmup, "losses": [r.get("loss") for r in steps],
              "gpu": args.gpu, "startup": startup}
    record.update(json.loads(args.settings) if args.settings else {})
    if not steps:
        record["error"] = "no step records (see the run's log)"
    return record


def peak_gib(path):
    """The largest of nvidia-smi's samples (MiB) in GiB; None without samples (the CPU)."""
    memory = [float(x) for x in open(path).read().split() if x.replace(".", "").isdigit()]
    return max(memory) / 1024 if memory else None


def peer(args) -> dict:
    line = sys.stdin.read().strip()
    record = json.loads(line) if line.startswith("{") else {"engine": "hf+peft", "error": "no record (see peers.log)"}
    record["model"] = args.model
    record["peak_mem_gib_smi"] = peak_gib(args.memory)
    return record


def combine(args) -> dict:
    ours = json.load(open(args.ours))
    peers = [p for p in lines(args.peers) if p.get("model") == ours["model"] and "error" not in p]
    if peers:
        peer = peers[-1]
        ours["peer"] = peer["engine"]
        for key in ("tokens_per_s", "images_per_s"):
            ours[f"peer_{key}"] = peer.get(key)
            ours[f"{key}_ratio"] = (ours[key] / peer[key]
                                    if isinstance(ours.get(key), (int, float)) and peer.get(key) else None)
    return ours


def number(value, digits=0):
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "—"


def table(args) -> None:
    peers = lines(args.peers)
    print("| model | surogate tok/s | img/s | peak GiB | peer | peer tok/s | img/s | peak GiB (torch / smi) "
          "| ratio tok/s | ratio img/s |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in lines(args.vl):
        peer = next((p for p in reversed(peers) if p.get("model") == r["model"] and "error" not in p), {})
        print(f"| {r['model']} | {number(r.get('tokens_per_s'))} | {number(r.get('images_per_s'), 2)} | "
              f"{number(r.get('peak_mem_gib'), 1)} | {peer.get('engine', '—')} | "
              f"{number(peer.get('tokens_per_s'))} | "
              f"{number(peer.get('images_per_s'), 2)} | {number(peer.get('peak_mem_gib'), 1)} / "
              f"{number(peer.get('peak_mem_gib_smi'), 1)} | {number(r.get('tokens_per_s_ratio'), 2)}x | "
              f"{number(r.get('images_per_s_ratio'), 2)}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    ours = commands.add_parser("surogate")
    ours.add_argument("log")
    ours.add_argument("--model", required=True)
    ours.add_argument("--tokenize-output", required=True)
    ours.add_argument("--dry-run", required=True)
    ours.add_argument("--memory", required=True)
    ours.add_argument("--warmup", type=int, default=2)
    ours.add_argument("--gpu")
    ours.add_argument("--settings", help="a JSON object merged into the record (the run's settings)")
    theirs = commands.add_parser("peer")
    theirs.add_argument("--model", required=True)
    theirs.add_argument("--memory", required=True)
    both = commands.add_parser("combine")
    both.add_argument("ours")
    both.add_argument("peers")
    shown = commands.add_parser("table")
    shown.add_argument("vl")
    shown.add_argument("peers")
    args = parser.parse_args()
    if args.command == "table":
        table(args)
    else:
        print(json.dumps({"surogate": surogate, "peer": peer, "combine": combine}[args.command](args)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
