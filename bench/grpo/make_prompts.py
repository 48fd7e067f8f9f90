#!/usr/bin/env python3
"""Writes the GRPO benchmark's prompts: ROWS arithmetic questions {"prompt", "answer"}, plain text
(no chat template: both engines feed the string as it is), deterministic (fixed seed).

  python3 bench/grpo/make_prompts.py OUTPUT.jsonl [ROWS]

  {"prompt": "Compute 417 + 286. Give the number as \\boxed{N}.\nAnswer:", "answer": "703"}

The rewards (bench/grpo/rewards.py) read the `answer` column; random-weight models never earn
them, which does not matter for a throughput run (both engines do the same work either way).
"""
import json
import random
import sys

OPERATIONS = [("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b)]


def main() -> None:
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    rng = random.Random(0)
    with open(out, "w") as file:
        for _ in range(rows):
            symbol, apply = rng.choice(OPERATIONS)
            a, b = rng.randint(10, 999), rng.randint(10, 99 if symbol == "*" else 999)
            prompt = f"Compute {a} {symbol} {b}. Give the number as \\boxed{{N}}.\nAnswer:"
            file.write(json.dumps({"prompt": prompt, "answer": str(apply(a, b))}) + "\n")


if __name__ == "__main__":
    main()
