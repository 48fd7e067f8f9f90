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

SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]
CHARACTERS = list("0123456789+= ")
PROMPTS = 2000
LARGEST = 49


def tokenizer_json() -> dict:
    vocab = {token: index for index, token in enumerate(SPECIAL)}
    for character in CHARACTERS:
        vocab.setdefault(character, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def tokenizer_config() -> dict:
    return {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
            "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast"}


def model_config(vocab_size: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 64, "tie_word_embeddings": True, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }


def main() -> None:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "generated")
    model_dir = out / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_json()
    (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer, indent=1))
    (model_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=1))
    (model_dir / "config.json").write_text(json.dumps(model_config(len(tokenizer["model"]["vocab"])), indent=1))
    rng = random.Random(1234)
    with open(out / "prompts.jsonl", "w") as f:
        for _ in range(PROMPTS):
            a, b = rng.randint(0, LARGEST), rng.randint(0, LARGEST)
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")
    print(f"wrote the grpo example to {out}")


if __name__ == "__main__":
    main()
