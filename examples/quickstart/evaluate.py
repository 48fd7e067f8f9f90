#!/usr/bin/env python3
"""Scores a trained quickstart model on the held-out reversal examples by greedy decoding.

  python3 examples/quickstart/evaluate.py [MODEL_DIR] [VALID_JSONL]
      (defaults: output/quickstart, examples/quickstart/generated/valid.jsonl)

The model is read from its Hugging Face folder (config.json + safetensors) with the PyPI
`safetensors` package and run by an independent numpy implementation of the Llama forward pass
(RMSNorm, RoPE, grouped-query causal attention, SwiGLU, tied or untied LM head), so the numbers do
not depend on Surogate's own kernels. For each held-out word the prompt "<s>reverse: WORD = " is
decoded greedily until </s> (at most len(WORD) + 1 tokens). Prints one JSON line:
  exact_match      fraction of words reversed exactly
  char_accuracy    fraction of answer positions with the right letter
  chance_exact     expected exact match of random letters (mean of 26^-len)
  chance_char      1/26
"""
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import load_file


def load_model(model_dir: pathlib.Path):
    config = json.loads((model_dir / "config.json").read_text())
    weights = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        weights.update({k: v.astype(np.float64) for k, v in load_file(str(file)).items()})
    vocab = json.loads((model_dir / "tokenizer.json").read_text())["model"]["vocab"]
    return config, weights, vocab


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x, positions, theta):
    # x [heads, T, D]; Llama's rotate-half convention.
    half = x.shape[-1] // 2
    inv_freq = 1.0 / theta ** (np.arange(half) * 2.0 / x.shape[-1])
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = np.concatenate([np.cos(angles)] * 2, -1), np.concatenate([np.sin(angles)] * 2, -1)
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def logits_of(config, w, ids):
    hidden = w["model.embed_tokens.weight"][ids]
    T = len(ids)
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    eps, theta = config["rms_norm_eps"], config.get("rope_theta", 10000.0)
    positions = np.arange(T, dtype=np.float64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(hidden, w[p + "input_layernorm.weight"], eps)
        def proj(name, v):
            out = v @ w[p + name + ".weight"].T
            return out + w[p + name + ".bias"] if p + name + ".bias" in w else out
        q = proj("self_attn.q_proj", x).reshape(T, heads, head_dim).transpose(1, 0, 2)
        k = proj("self_attn.k_proj", x).reshape(T, kv_heads, head_dim).transpose(1, 0, 2)
        v = proj("self_attn.v_proj", x).reshape(T, kv_heads, head_dim).transpose(1, 0, 2)
        q, k = rope(q, positions, theta), rope(k, positions, theta)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v
        hidden = hidden + proj("self_attn.o_proj", context.transpose(1, 0, 2).reshape(T, heads * head_dim))
        x = rms_norm(hidden, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = proj("mlp.gate_proj", x), proj("mlp.up_proj", x)
        hidden = hidden + proj("mlp.down_proj", gate / (1.0 + np.exp(-gate)) * up)
    hidden = rms_norm(hidden, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return hidden @ head.T


def main() -> None:
    model_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "output/quickstart")
    valid = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "examples/quickstart/generated/valid.jsonl")
    config, weights, vocab = load_model(model_dir)
    inverse = {index: token for token, index in vocab.items()}
    bos, eos = vocab["<s>"], vocab["</s>"]
    exact = chars = chars_right = 0
    chance_exact = 0.0
    rows = [json.loads(line) for line in valid.read_text().splitlines() if line.strip()]
    for row in rows:
        word, target = row["instruction"], row["output"]
        ids = [bos] + [vocab[c] for c in f"reverse: {word} = "]
        answer = ""
        for _ in range(len(word) + 1):
            token = int(np.argmax(logits_of(config, weights, np.array(ids))[-1]))
            if token == eos:
                break
            answer += inverse[token]
            ids.append(token)
        exact += answer == target
        chars += len(target)
        chars_right += sum(a == b for a, b in zip(answer, target))
        chance_exact += 26.0 ** -len(target)
    print(json.dumps({"examples": len(rows), "exact_match": exact / len(rows), "char_accuracy": chars_right / chars,
                      "chance_exact": chance_exact / len(rows), "chance_char": 1 / 26}))


if __name__ == "__main__":
    main()
