#!/usr/bin/env python3
"""Says whether the quickstart model learned: greedy decoding of the held-out words plus the
held-out answer loss that `surogate sft` logged before and after training.

  python3 examples/quickstart/evaluate.py [MODEL_DIR] [VALID_JSONL] [--min-exact F] [--min-loss-drop F]
      (defaults: output/quickstart, examples/quickstart/generated/valid.jsonl, 0.9, 0.6)

The model is read from its Hugging Face folder (config.json + safetensors) with the PyPI
`safetensors` package and run by an independent numpy implementation of the Llama forward pass
(RMSNorm, RoPE, grouped-query causal attention, SwiGLU, tied or untied LM head), so the numbers do
not depend on Surogate's own kernels. For each held-out word the prompt "<s>WORD=" (make_example.py's
PROMPT_FORMAT up to the answer) is decoded greedily until </s> (at most len(WORD) + 1 tokens).
The answer loss is the mean cross-entropy on the answer tokens and </s> of the validation set, from
the run's JSONL log in MODEL_DIR (its first and last "eval" records).

Prints one JSON line with the numbers, then one verdict line, e.g.
  quickstart: learned — held-out exact match 99.0% (198/200), held-out answer loss 3.626 -> 0.010 (-99.7%)
and exits 0 if exact match >= --min-exact and the loss fell by >= --min-loss-drop (a fraction of
the loss before training), else 1 ("quickstart: NOT learned — ..."). Without numpy / safetensors the
exact match is skipped and the log's next-token accuracy on the answers stands in for it.
"""
import argparse
import json
import pathlib
import sys

from make_example import ALPHABET, PROMPT_FORMAT

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError:  # then the verdict rests on the run's log alone
    np = load_file = None


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


def prompt_of(word: str) -> str:
    return PROMPT_FORMAT.split("{output}")[0].replace("{instruction}", word)


def greedy_scores(model_dir: pathlib.Path, rows: list) -> dict:
    """Exact match and per-letter accuracy of greedy answers on `rows` (numpy forward pass); {}
    without numpy / safetensors."""
    if np is None:
        return {}
    config, weights, vocab = load_model(model_dir)
    inverse = {index: token for token, index in vocab.items()}
    bos, eos = vocab["<s>"], vocab["</s>"]
    exact = chars = chars_right = 0
    for row in rows:
        word, target = row["instruction"], row["output"]
        ids = [bos] + [vocab[c] for c in prompt_of(word)]
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
                     + " (exact match skipped: pip install numpy safetensors)")
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
    parser.add_argument("--min-exact", type=float, default=0.9, help="held-out exact match needed (default 0.9)")
    parser.add_argument("--min-loss-drop", type=float, default=0.6,
                        help="needed fall of the held-out answer loss, as a fraction of its value before training (default 0.6)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.valid.read_text().splitlines() if line.strip()]
    scores = greedy_scores(args.model_dir, rows)
    logged = logged_eval(args.model_dir)
    print(json.dumps({"examples": len(rows), **{k: v for k, v in scores.items() if k != "exact"}, **logged,
                      "chance_exact": sum(len(ALPHABET) ** -len(r["output"]) for r in rows) / len(rows),
                      "chance_char": 1 / len(ALPHABET)}))
    learned, line = verdict(scores, logged, len(rows), args.min_exact, args.min_loss_drop)
    print(line)
    sys.exit(0 if learned else 1)


if __name__ == "__main__":
    main()
