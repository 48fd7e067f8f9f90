"""An independent numpy implementation of the Llama forward pass (float64): RMSNorm, RoPE
(rotate-half), grouped-query causal attention, SwiGLU, tied or untied LM head, read from a Hugging
Face folder with the PyPI `safetensors` package. Tests use it as an oracle that does not share
Surogate's kernels (tests/python/test_train_outputs.py)."""
import json
import pathlib

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


def embed(w, ids):
    return w["model.embed_tokens.weight"][ids]


def attention_setup(config, T):
    """(heads, kv_heads, head_dim, eps, theta, positions, causal mask) of a sequence of T tokens."""
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    eps, theta = config["rms_norm_eps"], config.get("rope_theta", 10000.0)
    return heads, kv_heads, head_dim, eps, theta, np.arange(T, dtype=np.float64), np.triu(np.full((T, T), -np.inf), 1)


def logits_of(config, w, ids):
    hidden, T, (heads, kv_heads, head_dim, eps, theta, positions, mask) = embed(w, ids), len(ids), attention_setup(config, len(ids))
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
