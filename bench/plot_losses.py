"""Per-step loss curves of bench/run_cli_job.sh records as one self-contained SVG (no plotting
library needed): `python3 bench/plot_losses.py records.jsonl out.svg [variant ...]` draws the
"losses" of each record (all, or the named variants) on shared axes, with a legend."""
import json
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def main(records_path, svg_path, variants):
    records = [json.loads(line) for line in open(records_path) if line.startswith("{")]
    records = [r for r in records if r.get("losses") and (not variants or r["variant"] in variants)]
    if not records:
        sys.exit(f"{records_path}: no records with losses" + (f" for {variants}" if variants else ""))
    width, height, left, right, top, bottom = 720, 400, 60, 20, 20, 40
    steps = max(len(r["losses"]) for r in records)
    values = [v for r in records for v in r["losses"]]
    low, high = min(values), max(values)
    x = lambda i: left + (width - left - right) * i / max(1, steps - 1)
    y = lambda v: top + (height - top - bottom) * (high - v) / max(1e-12, high - low)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>']
    parts.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>')
    for fraction in (0, 0.5, 1):
        value = low + (high - low) * fraction
        parts.append(f'<text x="{left - 5}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.2f}</text>')
    for step in (1, steps // 2, steps):
        parts.append(f'<text x="{x(step - 1):.1f}" y="{height - bottom + 15}" text-anchor="middle">{step}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 5}" text-anchor="middle">optimizer step</text>')
    for index, record in enumerate(records):
        colour = COLOURS[index % len(COLOURS)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(record["losses"]))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{points}"/>')
        label = f'{record["model"]} {record["variant"]}'
        parts.append(f'<text x="{width - right - 5}" y="{top + 15 * (index + 1)}" text-anchor="end" fill="{colour}">{label}</text>')
    parts.append("</svg>")
    with open(svg_path, "w") as out:
        out.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
