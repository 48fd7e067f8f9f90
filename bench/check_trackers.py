#!/usr/bin/env python3
"""Checks that a run with `report_to: [wandb, aim]` (and `log_gpu_util`) holds the same numbers in
its JSONL log, its HTML report and both trackers' records.

    python3 bench/check_trackers.py OUTPUT_DIR [--aim-repo DIR] [--require-gpu]
    python3 bench/check_trackers.py OUTPUT_DIR --replay FEED.jsonl [--aim-repo DIR] [--require-gpu]

OUTPUT_DIR is the run's output_dir (log-*.jsonl, report-*.html, trackers.json, wandb/ with
WANDB_MODE=offline). --aim-repo is the run's aim_repo (default OUTPUT_DIR/aim). --replay feeds a
recorded tracker feed (bench/record_tracker_feed.sh, for a GPU machine without the SDKs) through
the real helper (src/train/observe/tracker_helper.py) here first, into OUTPUT_DIR/wandb and the Aim repo.

Compared, step by step and exactly (the trackers get the log's JSON numbers): train loss, lr, grad
norm, tokens/s; eval loss / accuracy; every GPU value of the `gpu` records. The HTML report's
data-points are compared with the log (memory in GiB there, to 1e-12 relative). Prints one line
per check and exits 1 on any mismatch. Needs wandb and aim (scripts/install_deps.sh).
"""
import argparse
import html.parser
import json
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAIN_KEYS = ("loss", "lr", "grad_norm", "tokens_per_second", "epoch", "tokens", "loss_tokens", "step_seconds")
GIB = 1024.0 ** 3


def log_records(out):
    logs = sorted(pathlib.Path(out).glob("log-*.jsonl"))
    return [json.loads(line) for log in logs for line in log.read_text().splitlines() if line.strip()]


def expected_metrics(records):
    """{step: {tracker metric: value}} from the JSONL log, named as the helper names them."""
    expected = {}
    for record in records:
        kind, step = record.get("type"), record.get("step")
        if kind == "step":
            expected.setdefault(step, {}).update({f"train/{k}": record[k] for k in TRAIN_KEYS if k in record})
        elif kind == "eval":
            expected.setdefault(step, {}).update({f"eval/{k[5:] if k.startswith('eval_') else k}": v
                                                  for k, v in record.items()
                                                  if k not in ("type", "time", "step", "final")})
        elif kind == "gpu":
            for gpu in record["gpus"]:
                expected.setdefault(step, {}).update({f"gpu{gpu['index']}/{k}": v for k, v in gpu.items() if k != "index"})
    return expected


def wandb_runs(out):
    """[records of each offline run under OUT/wandb], read with wandb's own transaction-log reader."""
    runs = []
    for folder in sorted((pathlib.Path(out) / "wandb").glob("offline-run-*")):
        result = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"wandb leet inspect {folder}: {result.stderr}")
        runs.append([json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")])
    return runs


def wandb_history(records):
    """{step: {metric: value}} from one wandb run's history records."""
    history = {}
    for record in records:
        if record["type"] != "history":
            continue
        items = record["history"]["item"]
        if isinstance(items, dict):  # `wandb leet inspect --json` gives the decoded values
            values = dict(items)
        else:  # the raw protobuf form: [{"key" or "nested_key", "value_json"}]
            values = {"/".join(item["nested_key"]) if "nested_key" in item else item["key"]: json.loads(item["value_json"])
                      for item in items}
        step = values.get("_step", record["history"].get("step", {}).get("num", 0))
        history.setdefault(int(step), {}).update({k: v for k, v in values.items() if not k.startswith("_")})
    return history


def aim_run(repo_path, run_hash):
    """(run, {metric: {step: value}}) of one run of an Aim repository."""
    from aim import Repo
    from aim.sdk.index_manager import RepoIndexManager
    repo = Repo.from_path(str(repo_path))
    RepoIndexManager.get_index_manager(repo).index(run_hash)  # what `aim up` does in the background
    repo = Repo.from_path(str(repo_path))
    run = repo.get_run(run_hash)
    if run is None:
        raise RuntimeError(f"aim run {run_hash} is not in {repo_path}")
    metrics = {}
    for metric in run.metrics():
        steps, (values, _epochs, _times) = metric.data.items_list()
        metrics[metric.name] = dict(zip(steps, values))
    return run, metrics


class _Points(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.series = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "polyline" and "data-series" in attrs:
            points = {}
            for pair in attrs.get("data-points", "").split():
                step, value = pair.split(":")
                points[int(float(step))] = float(value)
            self.series.setdefault(attrs["data-series"], {}).update(points)


def report_series(out):
    """{series label: {step: value}} from the run's HTML report."""
    reports = sorted(pathlib.Path(out).glob("report-*.html"))
    if not reports:
        raise RuntimeError(f"no report-*.html in {out}")
    parser = _Points()
    parser.feed(reports[-1].read_text())
    return parser.series


def replay(feed, out, aim_repo):
    """Runs the recorded feed through the real helper, with its paths moved to this machine."""
    lines = pathlib.Path(feed).read_text().splitlines()
    start = json.loads(lines[0])
    start["state_file"] = str(pathlib.Path(out) / "trackers.json")
    start["wandb"]["dir"] = str(out)
    start["aim"]["repo"] = str(aim_repo)
    helper = (REPO_ROOT / "src/train/observe/tracker_helper.py").read_text()
    env = dict(__import__("os").environ, WANDB_MODE="offline")
    result = subprocess.run([sys.executable, "-u", "-c", helper, "replay"], input="\n".join([json.dumps(start)] + lines[1:]) + "\n",
                            text=True, capture_output=True, env=env, timeout=600)
    print(result.stdout[-2000:], result.stderr[-2000:], sep="")
    if result.returncode != 0:
        raise RuntimeError("the helper failed on the replayed feed")


class Checker:
    def __init__(self):
        self.failures = 0

    def check(self, label, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {label}{(': ' + detail) if detail and not ok else ''}")
        self.failures += 0 if ok else 1

    def same(self, label, expected, actual, relative=0.0):
        """Every (step, metric) of `expected` in `actual` with the same value."""
        missing, differ, count = [], [], 0
        for step, metrics in sorted(expected.items()):
            for name, value in metrics.items():
                count += 1
                got = actual.get(step, {}).get(name)
                if got is None:
                    missing.append(f"{name}@{step}")
                elif got != value and not (relative and abs(got - value) <= relative * abs(value)):
                    differ.append(f"{name}@{step}: log {value} vs {got}")
        self.check(f"{label}: {count} values", not missing and not differ and count > 0,
                   "; ".join((missing[:5] + differ[:5])) or "nothing to compare")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--aim-repo")
    parser.add_argument("--replay")
    parser.add_argument("--require-gpu", action="store_true")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    aim_repo = pathlib.Path(args.aim_repo) if args.aim_repo else out / "aim"
    if args.replay:
        replay(args.replay, out, aim_repo)
    checker = Checker()
    records = log_records(out)
    expected = expected_metrics(records)
    steps = [r["step"] for r in records if r["type"] == "step"]
    gpu_records = [r for r in records if r["type"] == "gpu"]
    checker.check(f"log: {len(steps)} steps, {len(gpu_records)} gpu samples", bool(steps) and
                  (bool(gpu_records) or not args.require_gpu), "no gpu records (log_gpu_util on a GPU run?)")

    # HTML report against the log: its series labels → the log's values (memory in GiB there).
    report = {"train loss": ("train/loss", 1.0), "learning rate": ("train/lr", 1.0),
              "grad norm (before clipping)": ("train/grad_norm", 1.0)}
    gpu_labels = {"compute": "utilization_percent", "memory activity": "memory_utilization_percent",
                  "used": "memory_used_bytes", "power": "power_watts", "SM clock": "sm_clock_mhz",
                  "memory clock": "memory_clock_mhz"}
    from_report, report_expected = {}, {}
    for label, values in report_series(out).items():
        if label.startswith("GPU "):
            index, _, kind = label[4:].partition(" ")
            if kind not in gpu_labels:
                continue
            key, scale = f"gpu{index}/{gpu_labels[kind]}", GIB if kind == "used" else 1.0
        elif label in report:
            key, scale = report[label]
        else:
            continue
        for step, value in values.items():
            from_report.setdefault(step, {})[key] = value * scale
        for step, metrics in expected.items():
            if key in metrics:
                report_expected.setdefault(step, {})[key] = metrics[key]
    checker.same("HTML report data-points = log", report_expected, from_report, relative=1e-12)

    ids = json.loads((out / "trackers.json").read_text())
    runs = wandb_runs(out)
    checker.check(f"wandb: {len(runs)} offline run(s) with id {ids.get('wandb_id')}", bool(runs) and all(
        next(r["run"]["run_id"] for r in records_ if r["type"] == "run") == ids.get("wandb_id") for records_ in runs))
    history = {}
    for run_records in runs:
        for step, values in wandb_history(run_records).items():
            history.setdefault(step, {}).update(values)
    checker.same("wandb history = log", expected, history)

    run, metrics = aim_run(aim_repo, ids["aim_hash"])
    by_step = {}
    for name, values in metrics.items():
        for step, value in values.items():
            by_step.setdefault(step, {})[name] = value
    checker.same(f"aim run {ids['aim_hash']} ('{run.name}') = log", expected, by_step)
    print(f"{checker.failures} failed" if checker.failures else "all checks passed")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
