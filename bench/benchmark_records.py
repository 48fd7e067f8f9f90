"""The committed benchmark records (bench/results/*.jsonl) and how a headline row picks one.

A `Pick` names one record: the file (its name under bench/results/) and field values the record
must have. Resolving it fails unless exactly one record of the file matches, so a headline figure
always comes from a record, and a record that disappears or is duplicated stops the page's check
(bench/headline_tables.py --check) instead of leaving a stale number behind.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


class RecordError(ValueError):
    """A Pick that names no record, or more than one."""


@dataclass(frozen=True)
class Pick:
    file: str
    match: dict = field(default_factory=dict)
    # The n-th of several matching records (runs repeated in one call), counted from 0.
    nth: int | None = None
    # tokens_per_s, or another field holding the rate; "median_step" takes the median of
    # step_tokens_per_s (the longest-context rows, whose last step is the epoch's padding).
    metric: str = "tokens_per_s"

    @property
    def date(self) -> str:
        return self.file[:10]


def load(file: str, results: Path = RESULTS) -> list[dict]:
    path = results / file
    if not path.is_file():
        raise RecordError(f"{path}: no such record file")
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise RecordError(f"{path}:{number}: not JSON ({error})") from error
    return records


def resolve(pick: Pick, results: Path = RESULTS) -> dict:
    found = [r for r in load(pick.file, results) if all(r.get(k) == v for k, v in pick.match.items())]
    if pick.nth is not None:
        if pick.nth >= len(found):
            raise RecordError(f"{pick.file}: {pick.match} matches {len(found)} records, not a #{pick.nth}")
        return found[pick.nth]
    if len(found) != 1:
        raise RecordError(f"{pick.file}: {pick.match} matches {len(found)} records, expected exactly one")
    return found[0]


def rate(pick: Pick, record: dict) -> float:
    if pick.metric == "median_step":
        steps = record.get("step_tokens_per_s")
        if not steps:
            raise RecordError(f"{pick.file}: {pick.match} has no step_tokens_per_s")
        return float(statistics.median(steps))
    if not isinstance(record.get(pick.metric), (int, float)):
        raise RecordError(f"{pick.file}: {pick.match} has no {pick.metric}")
    return float(record[pick.metric])


def peak_gib(record: dict) -> float | None:
    """The peak GPU memory of a run (the largest GPU's for several), in GiB, if recorded."""
    if isinstance(record.get("peak_mem_gib"), (int, float)):
        return float(record["peak_mem_gib"])
    if record.get("peak_mem_gib_per_gpu"):
        return float(max(record["peak_mem_gib_per_gpu"]))
    if isinstance(record.get("peak_reserved_gib"), (int, float)):
        return float(record["peak_reserved_gib"])
    if isinstance(record.get("peak_mem_mib_surogate"), (int, float)):
        return record["peak_mem_mib_surogate"] / 1024
    return None


def gpu_name(record: dict) -> str | None:
    """The record's GPU as the tables write it ("H100 80GB", "H200"), if it names one."""
    name = record.get("gpu")
    if not isinstance(name, str):
        return None
    for known in ("H200", "H100 80GB"):  # "H200 (...) offers an H100 80GB's total" is an H200
        if known in name:
            return known
    return name
