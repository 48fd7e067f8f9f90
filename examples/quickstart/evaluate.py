#!/usr/bin/env python3
"""Says whether the quickstart model learned: greedy decoding of the held-out words plus the
held-out answer loss that `surogate sft` logged before and after training.

  python3 examples/quickstart/evaluate.py [MODEL_DIR] [VALID_JSONL] [--surogate PATH] [--min-exact F]
      [--min-loss-drop F]   (defaults: output/quickstart, examples/quickstart/generated/valid.jsonl,
      $SUROGATE_BIN / build/surogate / surogate on the PATH, 0.9, 0.6)

The trained folder is decoded by `surogate generate` (docs/generation.md), as a user would try the
model: for each held-out word the prompt "<s>WORD=" (make_example.py's PROMPT_FORMAT up to the
answer) greedily until </s> (at most len(WORD) + 1 tokens).
The answer loss is the mean cross-entropy on the answer tokens and </s> of the validation set, from
the run's JSONL log in MODEL_DIR (its first and last "eval" records).

Prints one JSON line with the numbers, then one verdict line, e.g.
  quickstart: learned — held-out exact match 99.0% (198/200), held-out answer loss 3.626 -> 0.010 (-99.7%)
and exits 0 if exact match >= --min-exact and the loss fell by >= --min-loss-drop (a fraction of
the loss before training), else 1 ("quickstart: NOT learned — ..."). Without a surogate command the
exact match is skipped and the log's next-token accuracy on the answers stands in for it.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from make_example import ALPHABET, PROMPT_FORMAT

def prompt_of(word: str) -> str:
    return PROMPT_FORMAT.split("{output}")[0].replace("{instruction}", word)


def surogate_command(explicit):
    """The surogate command: --surogate, $SUROGATE_BIN, ./build/surogate, or `surogate` on the PATH."""
    for candidate in (explicit, os.environ.get("SUROGATE_BIN"), "build/surogate", shutil.which("surogate")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def greedy_scores(model_dir: pathlib.Path, rows: list, surogate=None) -> dict:
    """Exact match and per-letter accuracy of greedy answers on `rows`, decoded by
    `surogate generate` (the prompt "<s>WORD=", until </s>); {} when no surogate command is found."""
    if surogate is None:
        return {}
    vocab = json.loads((model_dir / "tokenizer.json").read_text())["model"]["vocab"]
    prompts = [{"input_ids": [vocab["<s>"]] + [vocab[c] for c in prompt_of(row["instruction"])]} for row in rows]
    longest = max(len(row["instruction"]) for row in rows) + 1
    with tempfile.TemporaryDirectory() as scratch:
        source, target = pathlib.Path(scratch) / "prompts.jsonl", pathlib.Path(scratch) / "answers.jsonl"
        source.write_text("".join(json.dumps(p) + "\n" for p in prompts))
        subprocess.run([surogate, "generate", "--model", str(model_dir), "--input", str(source), "--output",
                        str(target), "--max_new_tokens", str(longest), "--temperature", "0",
                        "--batch_size", "32"], check=True, stdout=subprocess.DEVNULL)
        answers = [json.loads(line)["completion"] for line in target.read_text().splitlines()]
    exact = chars = chars_right = 0
    for row, answer in zip(rows, answers):
        word, expected = row["instruction"], row["output"]
        answer = answer[:len(word) + 1]  # the decoding budget of one row: its answer and </s>
        exact += answer == expected
        chars += len(expected)
        chars_right += sum(a == b for a, b in zip(answer, expected))
    return {"exact": exact, "exact_match": exact / len(rows), "char_accuracy": chars_right / chars}


def logged_eval(model_dir: pathlib.Path) -> dict:
    """The first and last "eval" records of the newest log-*.jsonl in model_dir ({} if none)."""
    logs = sorted(model_dir.glob("log-*.jsonl"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return {}
    evals = [r for r in map(json.loads, logs[-1].read_text().splitlines()) if r.get("type") == "eval"]
    if not evals:
        return {}
    return {"log": str(logs[-1]), "loss_before": evals[0]["eval_loss"], "loss_after": evals[-1]["eval_loss"],
            "token_accuracy": evals[-1]["eval_accuracy"], "steps": evals[-1]["step"]}


def verdict(scores: dict, logged: dict, examples: int, min_exact: float, min_loss_drop: float):
    """(learned, one line saying so)."""
    parts, learned = [], True
    if scores:
        ok = scores["exact_match"] >= min_exact
        learned &= ok
        parts.append(f"held-out exact match {100 * scores['exact_match']:.1f}% ({scores['exact']}/{examples})"
                     + ("" if ok else f" (need >= {100 * min_exact:.0f}%)"))
    elif logged:
        ok = logged["token_accuracy"] >= min_exact
        learned &= ok
        parts.append(f"held-out answer token accuracy {100 * logged['token_accuracy']:.1f}%"
                     + ("" if ok else f" (need >= {100 * min_exact:.0f}%)")
                     + " (exact match skipped: no surogate command found)")
    if logged:
        drop = 1.0 - logged["loss_after"] / logged["loss_before"]
        ok = drop >= min_loss_drop
        learned &= ok
        parts.append(f"held-out answer loss {logged['loss_before']:.3f} -> {logged['loss_after']:.3f} "
                     f"(-{100 * drop:.1f}%)" + ("" if ok else f" (need a fall of >= {100 * min_loss_drop:.0f}%)"))
    else:
        learned = False
        parts.append("no eval records in the run's log-*.jsonl")
    return learned, f"quickstart: {'learned' if learned else 'NOT learned'} — " + ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="output/quickstart", type=pathlib.Path)
    parser.add_argument("valid", nargs="?", default="examples/quickstart/generated/valid.jsonl", type=pathlib.Path)
    parser.add_argument("--surogate", help="the surogate command (default: $SUROGATE_BIN, build/surogate, PATH)")
    parser.add_argument("--min-exact", type=float, default=0.9, help="held-out exact match needed (default 0.9)")
    parser.add_argument("--min-loss-drop", type=float, default=0.6,
                        help="needed fall of the held-out answer loss, as a fraction of its value before training (default 0.6)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.valid.read_text().splitlines() if line.strip()]
    scores = greedy_scores(args.model_dir, rows, surogate_command(args.surogate))
    logged = logged_eval(args.model_dir)
    print(json.dumps({"examples": len(rows), **{k: v for k, v in scores.items() if k != "exact"}, **logged,
                      "chance_exact": sum(len(ALPHABET) ** -len(r["output"]) for r in rows) / len(rows),
                      "chance_char": 1 / len(ALPHABET)}))
    learned, line = verdict(scores, logged, len(rows), args.min_exact, args.min_loss_drop)
    print(line)
    sys.exit(0 if learned else 1)


if __name__ == "__main__":
    main()
