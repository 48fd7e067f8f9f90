#!/usr/bin/env python3
"""Writes the embedded default example: a string-reversal task, a character-level tokenizer and
a tiny Llama-shaped model config (trained from scratch: no weights file).

  python3 examples/quickstart/make_example.py [OUTPUT_DIR]   (default: examples/quickstart/generated)

  OUTPUT_DIR/train.jsonl   4000 rows {"instruction": "abc", "output": "cba"}: 3-6 random letters
  OUTPUT_DIR/valid.jsonl   200 held-out rows (words that are not in train.jsonl)
  OUTPUT_DIR/model/        config.json (2-layer Llama, 0.4 M parameters), tokenizer.json,
                           tokenizer_config.json

config.yaml renders a row as PROMPT_FORMAT ("abc=cba"; loss only on "cba" and </s>). The short
prompt is deliberate: on 2 CPU cores every token costs, and "abc=" packs about 80 examples into a
16 x 64-token batch where "reverse: abc = " packs about 37. The tokenizer also covers
"reverse: " (the tests' prompt format for the same data).

Standard library only, deterministic (fixed seed), so it runs on a fresh machine.
"""
import json
import pathlib
import random
import sys

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]
# Every character the prompts and answers use (35 tokens with the specials).
CHARACTERS = sorted(set(ALPHABET + " :=reversRV"))
# config.yaml's prompt_format (tests/python/test_quickstart_example.py checks that they agree);
# evaluate.py decodes from PROMPT_FORMAT up to "{output}".
PROMPT_FORMAT = "{instruction}={output}"
MIN_LETTERS, MAX_LETTERS = 3, 6
TRAIN_ROWS, VALID_ROWS = 4000, 200


def tokenizer_json() -> dict:
    vocab = {token: index for index, token in enumerate(SPECIAL)}
    for character in CHARACTERS:
        vocab.setdefault(character, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}}},
        "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def tokenizer_config() -> dict:
    return {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
            "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True}


def model_config(vocab_size: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 64, "tie_word_embeddings": True, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }


def samples(rng: random.Random, count: int, seen: set) -> list:
    rows = []
    while len(rows) < count:
        word = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(MIN_LETTERS, MAX_LETTERS)))
        if word in seen:
            continue
        seen.add(word)
        rows.append({"instruction": word, "output": word[::-1]})
    return rows


def main() -> None:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "generated")
    model_dir = out / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_json()
    (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer, indent=1))
    (model_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=1))
    (model_dir / "config.json").write_text(json.dumps(model_config(len(tokenizer["model"]["vocab"])), indent=1))
    rng = random.Random(1234)
    seen: set = set()
    for name, count in (("train.jsonl", TRAIN_ROWS), ("valid.jsonl", VALID_ROWS)):
        with open(out / name, "w") as f:
            for row in samples(rng, count, seen):
                f.write(json.dumps(row) + "\n")
    print(f"wrote the quickstart example to {out}")


if __name__ == "__main__":
    main()
