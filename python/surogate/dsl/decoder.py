"""The built-in architectures written in the DSL: the Llama-family decoder (Llama 1/2/3.x,
Mistral, Qwen2/2.5, Qwen3) and the MoE decoders (Qwen3-MoE, Qwen2-MoE, Mixtral: moe.py's sparse
block in place of the MLP of sparse layers), the same graph as models/decoder_graph.cpp builds in C++.

tests/python/test_dsl.py (dense) and test_dsl_moe.py (MoE) prove it: for every fixture model, ``decoder.emit(model_dir, B, T)``
equals ``surogate ir model_dir --batch B --seq T``. Both stay, on purpose: the C++ builder makes the
CLI independent of Python, and this file is the example a new architecture starts from
(docs/models.md, "Adding an architecture in Python").

Pieces: :func:`weights` declares the parameter table with its HF names, :func:`inputs` the five
batch inputs, :func:`attention_block` / :func:`mlp_block` one layer's halves (dense MLP or
:func:`surogate.dsl.moe.moe_block`), :func:`decoder` the
whole model. Residual adds are fused into the next norm (``fused_residual_rmsnorm``), Qwen3's q/k
norm into RoPE (``fused_rmsnorm_rope``), exactly as in C++ (docs/models.md, "The forward graph").
"""
from __future__ import annotations

from typing import Dict, Optional

from surogate.dsl import moe
from surogate.dsl.graph import Graph, Tensor
from surogate.dsl.model import ModelConfig, model

# Engine name pattern -> Hugging Face name pattern ({i}: the layer), as models/model_spec.cpp.
LLAMA_WEIGHT_NAMES = {
    "embed.weight": "model.embed_tokens.weight",
    "layers.{i}.ln1.weight": "model.layers.{i}.input_layernorm.weight",
    "layers.{i}.attn.{p}.weight": "model.layers.{i}.self_attn.{p}.weight",
    "layers.{i}.attn.{p}.bias": "model.layers.{i}.self_attn.{p}.bias",
    "layers.{i}.attn.{n}.weight": "model.layers.{i}.self_attn.{n}.weight",
    "layers.{i}.ln2.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "layers.{i}.mlp.{p}.weight": "model.layers.{i}.mlp.{p}.weight",
    "layers.{i}.mlp.{p}.bias": "model.layers.{i}.mlp.{p}.bias",
    "final_norm.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}


def _hf(pattern: str, **fields: object) -> tuple:
    return pattern.format(**fields), LLAMA_WEIGHT_NAMES[pattern].format(**fields)


def weights(g: Graph, c: ModelConfig) -> Dict[str, Tensor]:
    """Every parameter, declared up front in the engine's order, with its HF name."""
    hidden, head_dim = c.hidden_size, c.head_dim
    q_width, kv_width = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    params: Dict[str, Tensor] = {}

    def add(pattern: str, shape, **fields: object) -> None:
        name, hf = _hf(pattern, **fields)
        params[name] = g.parameter(name, shape, hf=hf)

    add("embed.weight", [c.vocab_size, hidden])
    for i in range(c.num_hidden_layers):
        add("layers.{i}.ln1.weight", [hidden], i=i)
        for projection, out, inp, bias in (("q_proj", q_width, hidden, c.qkv_bias), ("k_proj", kv_width, hidden, c.qkv_bias),
                                           ("v_proj", kv_width, hidden, c.qkv_bias),
                                           ("o_proj", hidden, q_width, c.o_proj_bias)):
            add("layers.{i}.attn.{p}.weight", [out, inp], i=i, p=projection)
            if bias:
                add("layers.{i}.attn.{p}.bias", [out], i=i, p=projection)
        if c.qk_norm:
            add("layers.{i}.attn.{n}.weight", [head_dim], i=i, n="q_norm")
            add("layers.{i}.attn.{n}.weight", [head_dim], i=i, n="k_norm")
        add("layers.{i}.ln2.weight", [hidden], i=i)
        if moe.is_sparse(c, i):
            moe.weights(g, c, i, params)
            continue
        for projection, out, inp in (("gate_proj", c.intermediate_size, hidden), ("up_proj", c.intermediate_size, hidden),
                                     ("down_proj", hidden, c.intermediate_size)):
            add("layers.{i}.mlp.{p}.weight", [out, inp], i=i, p=projection)
            if c.mlp_bias:
                add("layers.{i}.mlp.{p}.bias", [out], i=i, p=projection)
    add("final_norm.weight", [hidden])
    if not c.tie_word_embeddings:
        add("lm_head.weight", [c.vocab_size, hidden])
    return params


def inputs(g: Graph) -> Dict[str, Tensor]:
    """The batch the engine feeds (docs/models.md): four I32 [B, T] tensors and the loss scale."""
    tokens = [g.batch, g.seq]
    names = ("input_ids", "position_ids", "document_ids", "targets")
    result = {name: g.input(name, "I32", tokens) for name in names}
    result["loss_scale"] = g.input("loss_scale", "F32", [])
    return result


def rope_tables(g: Graph, c: ModelConfig, batch: Dict[str, Tensor]):
    """RoPE's fp32 cos / sin tables for the batch's positions (one op, named "rope")."""
    rope = c.rope(g.seq)
    return g.ops.rope_cos_sin(batch["position_ids"], name="rope", inv_freq=rope["inv_freq"],
                              attention_scaling=rope["attention_scaling"], dtype="F32")


def projection(g: Graph, p: Dict[str, Tensor], x: Tensor, prefix: str, label: str) -> Tensor:
    """linear(x, W[, b]) with the bias when the model has one."""
    operands = [x, p[prefix + ".weight"]]
    if prefix + ".bias" in p:
        operands.append(p[prefix + ".bias"])
    return g.ops.linear(*operands, name=label)


class Residual:
    """The residual stream with its pending block output, added by the next norm."""

    def __init__(self, g: Graph, hidden: Tensor, eps: float) -> None:
        self.g, self.hidden, self.pending, self.eps = g, hidden, None, eps

    def add_and_norm(self, weight: Tensor, label: str) -> Tensor:
        if self.pending is None:
            return self.g.ops.rmsnorm(self.hidden, weight, eps=self.eps, name=label)[0]
        normed, stream = self.g.ops.fused_residual_rmsnorm(self.hidden, self.pending, weight, eps=self.eps,
                                                           name=label)[:2]
        self.hidden, self.pending = stream, None
        return normed


def attention_block(g: Graph, c: ModelConfig, p: Dict[str, Tensor], batch: Dict[str, Tensor], layer: int,
                    residual: Residual, rope: Dict[str, object], tables: Optional[tuple]) -> Tensor:
    prefix = f"layers.{layer}"
    with g.recompute("rmsnorm"):
        normed = residual.add_and_norm(p[f"{prefix}.ln1.weight"], "ln1")
    with g.recompute("qkv"):
        q = projection(g, p, normed, f"{prefix}.attn.q_proj", "q")
        k = projection(g, p, normed, f"{prefix}.attn.k_proj", "k")
        v = projection(g, p, normed, f"{prefix}.attn.v_proj", "v")
        if c.qk_norm:
            def norm_rope(heads: int) -> Dict[str, object]:
                return {"heads": heads, "head_dim": c.head_dim, "eps": c.rms_norm_eps, "inv_freq": rope["inv_freq"],
                        "attention_scaling": rope["attention_scaling"]}
            q = g.ops.fused_rmsnorm_rope(q, p[f"{prefix}.attn.q_norm.weight"], batch["position_ids"],
                                         name="q_norm_rope", **norm_rope(c.num_attention_heads))[0]
            k = g.ops.fused_rmsnorm_rope(k, p[f"{prefix}.attn.k_norm.weight"], batch["position_ids"],
                                         name="k_norm_rope", **norm_rope(c.num_key_value_heads))[0]
        else:
            cos, sin = tables
            q = g.ops.rope(q, cos, sin, heads=c.num_attention_heads, head_dim=c.head_dim, name="q_rope")
            k = g.ops.rope(k, cos, sin, heads=c.num_key_value_heads, head_dim=c.head_dim, name="k_rope")
    with g.recompute("att"):
        context = g.ops.attention(q, k, v, batch["document_ids"], query_heads=c.num_attention_heads,
                                  kv_heads=c.num_key_value_heads, head_dim=c.head_dim,
                                  window=c.sliding_window_per_layer[layer], name="attention")[0]
        return projection(g, p, context, f"{prefix}.attn.o_proj", "o")


def mlp_block(g: Graph, c: ModelConfig, p: Dict[str, Tensor], layer: int, residual: Residual) -> Tensor:
    prefix = f"layers.{layer}"
    with g.recompute("rmsnorm"):
        normed = residual.add_and_norm(p[f"{prefix}.ln2.weight"], "ln2")
    if moe.is_sparse(c, layer):
        return moe.moe_block(g, c, p, layer, normed)
    with g.recompute("ffn"):
        gate = projection(g, p, normed, f"{prefix}.mlp.gate_proj", "gate")
        up = projection(g, p, normed, f"{prefix}.mlp.up_proj", "up")
        with g.recompute("swiglu"):
            activated = g.ops.swiglu(gate, up, name="swiglu")
        return projection(g, p, activated, f"{prefix}.mlp.down_proj", "down")


def lm_head_loss(g: Graph, c: ModelConfig, p: Dict[str, Tensor], batch: Dict[str, Tensor], hidden: Tensor) -> Tensor:
    """The fused LM head + cross-entropy: loss_scale · Σ token cross-entropy, the first output."""
    head = p["embed.weight"] if c.tie_word_embeddings else p["lm_head.weight"]
    loss = g.ops.lm_head_loss(hidden, head, batch["targets"], batch["loss_scale"], chunks=max(1, g.lmhead_chunks),
                              name="loss")[0]
    g.output(loss)
    return loss


@model(name="decoder")
def decoder(g: Graph, c: ModelConfig) -> None:
    """The Llama-family and MoE decoders, as models/decoder_graph.cpp writes them (the router loss of
    MoE training graphs is the engine's to add: surogate/dsl/moe.py)."""
    batch = inputs(g)
    p = weights(g, c)
    rope = c.rope(g.seq)
    tables = None if c.qk_norm else rope_tables(g, c, batch)
    hidden = g.ops.embedding(batch["input_ids"], p["embed.weight"], name="embed")
    residual = Residual(g, hidden, c.rms_norm_eps)
    for layer in range(c.num_hidden_layers):
        with g.scope(f"layers.{layer}"):
            residual.pending = attention_block(g, c, p, batch, layer, residual, rope, tables)
            residual.pending = mlp_block(g, c, p, layer, residual)
    final = residual.add_and_norm(p["final_norm.weight"], "final_norm")
    lm_head_loss(g, c, p, batch, final)
