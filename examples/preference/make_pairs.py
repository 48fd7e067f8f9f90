#!/usr/bin/env python3
"""Writes preference pairs for the quickstart's string-reversal model (docs/preference-tuning.md):

  python3 examples/preference/make_pairs.py [--kto] [OUTPUT_DIR]   (default: examples/preference/generated)

  OUTPUT_DIR/train.jsonl   2000 rows {"prompt": "abc=", "chosen": "cba", "rejected": "cab"}
  OUTPUT_DIR/valid.jsonl   200 held-out rows (words that are not in train.jsonl)

With --kto the same pairs are written unpaired, for `loss.type: kto` (examples/preference/kto.yaml):

  OUTPUT_DIR/train_kto.jsonl   4000 rows {"prompt": "abc=", "completion": "cba", "label": true} and
                               {"prompt": "abc=", "completion": "cab", "label": false}, shuffled (a
                               row's KL completion is its predecessor's: not the same prompt's)
  OUTPUT_DIR/valid_kto.jsonl   400 held-out rows

The chosen completion is the correct reversal, the rejected one a near miss (two neighbouring
letters of the reversal swapped): the kind of mistake a half-trained reverser makes. Letters and
lengths as examples/quickstart/make_example.py's (its character tokenizer covers them). Standard
library only, deterministic (fixed seed).
"""
import json
import pathlib
import random
import sys

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
MIN_LETTERS, MAX_LETTERS = 3, 6
TRAIN_ROWS, VALID_ROWS = 2000, 200


def near_miss(answer: str, rng: random.Random) -> str:
    i = rng.randrange(len(answer) - 1)
    swapped = answer[:i] + answer[i + 1] + answer[i] + answer[i + 2:]
    return swapped if swapped != answer else answer[1:] + answer[0]


def pairs(count: int, rng: random.Random, exclude: set) -> list:
    rows, seen = [], set(exclude)
    while len(rows) < count:
        word = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(MIN_LETTERS, MAX_LETTERS)))
        if word in seen or word == word[::-1]:
            continue
        seen.add(word)
        answer = word[::-1]
        rows.append({"prompt": f"{word}=", "chosen": answer, "rejected": near_miss(answer, rng)})
    return rows


def unpaired(rows: list, rng: random.Random) -> list:
    """Each pair as two kto rows (TRL's unpair_preference_dataset), shuffled."""
    result = [{"prompt": row["prompt"], "completion": row[side], "label": side == "chosen"}
              for row in rows for side in ("chosen", "rejected")]
    rng.shuffle(result)
    return result


def main() -> None:
    arguments = [a for a in sys.argv[1:] if a != "--kto"]
    kto = "--kto" in sys.argv[1:]
    out = pathlib.Path(arguments[0] if arguments else pathlib.Path(__file__).parent / "generated")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(42)
    train = pairs(TRAIN_ROWS, rng, set())
    valid = pairs(VALID_ROWS, rng, {row["prompt"][:-1] for row in train})
    for name, rows in (("train.jsonl", train), ("valid.jsonl", valid)):
        (out / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"wrote {len(train)} training and {len(valid)} held-out pairs to {out}")
    if kto:
        for name, rows in (("train_kto.jsonl", train), ("valid_kto.jsonl", valid)):
            (out / name).write_text("".join(json.dumps(row) + "\n" for row in unpaired(rows, rng)))
        print(f"wrote {2 * len(train)} training and {2 * len(valid)} held-out kto rows to {out}")


if __name__ == "__main__":
    main()
