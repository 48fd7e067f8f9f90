#!/usr/bin/env python3
"""Writes a preference dataset for throughput runs: PAIRS rows {prompt, chosen, rejected} of
pseudo-English text (bench/cli/make_text_data.py's words), each prompt PROMPT_TOKENS tokens and
each completion about COMPLETION_TOKENS tokens (EOS included) under the model folder's tokenizer,
so both engines see the same lengths: `surogate dpo` and TRL's DPOTrainer append the EOS to the
completion and tokenize prompt and prompt + completion each as a whole.

  python3 bench/preference/make_pairs.py OUTPUT.jsonl MODEL_DIR [PAIRS] [PROMPT_TOKENS] [COMPLETION_TOKENS]
"""
import json
import random
import sys

from tokenizers import Tokenizer

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/cli")
from make_text_data import WORDS  # noqa: E402


def text_of(rng: random.Random, tokenizer: Tokenizer, tokens: int, leading_space: bool) -> str:
    """Sentences cut to `tokens` tokens (decoded back to text)."""
    words = " ".join(rng.choice(WORDS) for _ in range(tokens + 16))
    ids = tokenizer.encode((" " if leading_space else "") + words, add_special_tokens=False).ids[:tokens]
    return tokenizer.decode(ids)


def main() -> None:
    out, model_dir = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    prompt_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    completion_tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 512
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    rng = random.Random(0)
    with open(out, "w") as file:
        for _ in range(pairs):
            # The completion leaves room for the EOS the trainers append.
            row = {"prompt": text_of(rng, tokenizer, prompt_tokens, False),
                   "chosen": text_of(rng, tokenizer, completion_tokens - 1, True),
                   "rejected": text_of(rng, tokenizer, completion_tokens - 1, True)}
            file.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
