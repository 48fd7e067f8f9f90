#!/usr/bin/env python3
"""Writes the `surogate grpo` example: arithmetic prompts, a tiny Llama-shaped model (random
weights: no weights file, no hub) with a character-level tokenizer, and nothing else — the reward
functions are examples/grpo/rewards.py and the built-ins.

  python3 examples/grpo/make_example.py [OUTPUT_DIR]   (default: examples/grpo/generated)

  OUTPUT_DIR/prompts.jsonl  2000 rows {"prompt": "17+25=", "answer": "42"}: sums of two numbers < 50
  OUTPUT_DIR/model/         config.json (2-layer Llama, 0.4 M parameters), tokenizer.json,
                            tokenizer_config.json (digits, "+", "=", " " and the specials)

Standard library only, deterministic (fixed seed).
"""
import json
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "quickstart"))
import make_example as quickstart  # noqa: E402  (the tiny model and the tokenizer's layout)

CHARACTERS = list("0123456789+= ")
PROMPTS = 2000
LARGEST = 49


def tokenizer_json() -> dict:
    """The quickstart's character-level tokenizer over this example's characters (no BOS added)."""
    tokenizer = quickstart.tokenizer_json()
    vocab = {token: index for index, token in enumerate(quickstart.SPECIAL)}
    for character in CHARACTERS:
        vocab.setdefault(character, len(vocab))
    tokenizer["model"]["vocab"] = vocab
    tokenizer["post_processor"] = None
    return tokenizer


def tokenizer_config() -> dict:
    config = quickstart.tokenizer_config()
    config.pop("add_bos_token")
    return config


def main() -> None:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "generated")
    (out / "model").mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_json()
    model = {"tokenizer.json": tokenizer, "tokenizer_config.json": tokenizer_config(),
             "config.json": quickstart.model_config(len(tokenizer["model"]["vocab"]))}
    for name, content in model.items():
        (out / "model" / name).write_text(json.dumps(content, indent=1))
    rng = random.Random(1234)
    with open(out / "prompts.jsonl", "w") as f:
        for _ in range(PROMPTS):
            a, b = rng.randint(0, LARGEST), rng.randint(0, LARGEST)
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")
    print(f"wrote the grpo example to {out}")


if __name__ == "__main__":
    main()
