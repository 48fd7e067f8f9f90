#!/usr/bin/env python3
"""Draws the charts of docs/benchmarks.md from the committed records (the headline rows).

  python3 bench/plot_benchmarks.py docs/images

writes, from the rows of bench/headline_rows.py (each figure resolved from its record, as the
tables are):
  benchmarks-tokens-by-size.png   tokens/s by model size, Surogate against the strongest peer
  benchmarks-gpus.png             tokens/s over 1 / 2 / 4 GPUs, and the longest context
  benchmarks-memory.png           peak GPU memory against the peers
Needs matplotlib.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmark_records import RESULTS  # noqa: E402
from headline_rows import TABLES  # noqa: E402
from headline_tables import Figures, figures  # noqa: E402

OURS, PEER = "#1f6fb4", "#b0b0b0"
CHARTS = ("benchmarks-tokens-by-size.png", "benchmarks-gpus.png", "benchmarks-memory.png")


def rows(results: Path) -> dict[str, Figures]:
    return {row.anchor: figures(row, results) for table in TABLES for row in table.rows}


def _bars(ax, groups: list[str], pairs: list[tuple[float, float | None]], unit: str, title: str) -> None:
    width = 0.38
    xs = range(len(groups))
    ax.bar([x - width / 2 for x in xs], [p[0] for p in pairs], width, color=OURS, label="Surogate")
    ax.bar([x + width / 2 for x in xs], [p[1] or 0 for p in pairs], width, color=PEER,
           label="strongest peer (transformers + PEFT / Liger / bitsandbytes)")
    for x, (ours, peer) in zip(xs, pairs):
        if peer:
            ax.annotate(f"{ours / peer:.2f}×" if unit == "tokens/s" else f"{ours:.0f} / {peer:.0f}",
                        (x, max(ours, peer)), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), groups, fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def tokens_by_size(f: dict[str, Figures], out: Path) -> None:
    fig, (lora, full) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [4, 2]})
    sizes = ("0.6b", "1.7b", "4b", "8b")
    _bars(lora, [f"{s.upper()}" for s in sizes],
          [(f[f"lora-{s}-defaults"].rate, f[f"lora-{s}-defaults"].peer_rate) for s in sizes],
          "tokens/s", "Qwen3 LoRA r16, defaults, one H200 (ratio over the strongest peer)")
    _bars(full, ["0.6B", "1.7B"], [(f["full-0.6b"].rate, f["full-0.6b"].peer_rate),
                                   (f["full-1.7b-fast"].rate, f["full-1.7b-fast"].peer_rate)],
          "tokens/s", "Qwen3 full fine-tuning, fast, one H200")
    lora.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def gpus(f: dict[str, Figures], out: Path) -> None:
    fig, (rate, context) = plt.subplots(1, 2, figsize=(11, 4))
    series = (
        ("Qwen3-8B LoRA, data parallel (H100)", ["gpus-1-8b-lora", "gpus-2-8b-lora"], "o"),
        ("Qwen3-1.7B full, data parallel (H100)", ["gpus-1-1.7b-full", "gpus-2-1.7b-full"], "s"),
        ("Qwen3-8B LoRA, 32k documents, sequence parallel (H200)",
         ["gpus-1-long-32k", "gpus-2-long-32k", "gpus-4-long-32k"], "^"),
    )
    for label, anchors, marker in series:
        n = [f[a].row.gpus for a in anchors]
        rate.plot(n, [f[a].rate for a in anchors], marker=marker, color=OURS, label=f"Surogate: {label}")
        rate.plot(n, [f[a].peer_rate for a in anchors], marker=marker, color=PEER, linestyle="--",
                  label="its peer (DDP / context parallel)" if marker == "o" else None)
    rate.set_xticks([1, 2, 4])
    rate.set_xlabel("GPUs")
    rate.set_ylabel("tokens/s over all GPUs")
    rate.set_title("Tokens/s over GPUs (dashed: the peer)", fontsize=10)
    rate.set_ylim(0, rate.get_ylim()[1] * 1.4)  # room for the legend above the lines
    rate.legend(fontsize=7, loc="upper left")
    rate.grid(alpha=0.3)
    anchors = ["context-1-gpu", "context-2-gpu", "context-4-gpu"]
    lengths = [int(f[a].row.label.split("**")[1].replace(",", "").split()[0]) for a in anchors]
    context.bar([str(f[a].row.gpus) for a in anchors], [n / 1024 for n in lengths], color=OURS)
    for i, n in enumerate(lengths):
        context.annotate(f"{n:,}", (i, n / 1024), ha="center", va="bottom", fontsize=8)
    context.set_xlabel("GPUs (H200, sequence parallel)")
    context.set_ylabel("longest sequence_len (k tokens)")
    context.set_title("Longest context, Qwen3-8B LoRA", fontsize=10)
    context.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def memory(f: dict[str, Figures], out: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 4))
    anchors = ["lora-0.6b-defaults", "lora-1.7b-defaults", "lora-4b-defaults", "lora-8b-defaults",
               "lora-8b-fast", "full-1.7b-fast", "qlora-8b", "moe-2b-defaults"]
    names = ["0.6B LoRA", "1.7B LoRA", "4B LoRA", "8B LoRA", "8B LoRA fast", "1.7B full", "8B QLoRA", "MoE 2B LoRA"]
    _bars(ax, names, [(f[a].peak, f[a].peer_peak) for a in anchors], "peak GiB",
          "Peak GPU memory on one GPU (H100 or H200, as each row), Surogate against the row's strongest peer (labels: Surogate / peer GiB)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder the PNGs go to (docs/images)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the records' folder (bench/results)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    f = rows(args.results)
    tokens_by_size(f, args.out / CHARTS[0])
    gpus(f, args.out / CHARTS[1])
    memory(f, args.out / CHARTS[2])
    for name in CHARTS:
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
