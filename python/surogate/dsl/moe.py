"""The sparse MLP block of the MoE decoders (Qwen3-MoE, Qwen2-MoE, Mixtral) written in the DSL: the
same nodes, names, attributes and recompute groups as models/moe_block.cpp builds in C++, and the
same weights (models/model_spec.cpp). decoder.py calls it for every layer that config.json makes
sparse (``config.moe["sparse_layers"]``: decoder_sparse_step and mlp_only_layers, as the engine
resolved them); the other layers keep the dense MLP.

    logits = linear(x, router)                       "router"
    weights, indices, probs = router_topk(logits)    "route"      top_k, normalize (norm_topk_prob)
    order, position, offsets = moe_dispatch(indices) "dispatch"   tokens sorted by expert
    sorted = moe_permute(x, order, position)         "permute"
    expert_linear gate / up -> swiglu -> down         "experts_gate", "experts_up", "experts_swiglu", "experts_down"
    out = moe_unpermute(down, weights, position)     "experts_out"
    Qwen2-MoE: out = sigmoid_gated_add(out, shared expert(x), linear(x, shared_expert_gate))  "moe_out"

The router load-balancing loss (config.json's output_router_logits) is not written here: the
engine adds it to the training graphs of any IR by a fixed rule (models/ir_router_loss.h), exactly
where the C++ builder puts it, so one IR file serves training and evaluation.
"""
from __future__ import annotations

from typing import Dict

from surogate.dsl.graph import Graph, Tensor
from surogate.dsl.model import ModelConfig

# Engine name pattern -> Hugging Face name pattern ({i}: the layer; {p}: the projection; {hf}: its
# HF spelling; "{expert}" stays: the engine stacks one HF tensor per expert), as models/model_spec.cpp.
QWEN_MOE_WEIGHT_NAMES = {
    "layers.{i}.mlp.router.weight": "model.layers.{i}.mlp.gate.weight",
    "layers.{i}.mlp.experts.{p}.weight": "model.layers.{i}.mlp.experts.{{expert}}.{hf}.weight",
    "layers.{i}.mlp.shared_expert.{p}.weight": "model.layers.{i}.mlp.shared_expert.{p}.weight",
    "layers.{i}.mlp.shared_expert_gate.weight": "model.layers.{i}.mlp.shared_expert_gate.weight",
}
MIXTRAL_WEIGHT_NAMES = {
    "layers.{i}.mlp.router.weight": "model.layers.{i}.block_sparse_moe.gate.weight",
    "layers.{i}.mlp.experts.{p}.weight": "model.layers.{i}.block_sparse_moe.experts.{{expert}}.{hf}.weight",
}
MIXTRAL_EXPERT_PROJECTIONS = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}


def is_sparse(c: ModelConfig, layer: int) -> bool:
    """Whether ``layer`` has the MoE block (False for every layer of a dense model)."""
    return c.moe is not None and bool(c.moe["sparse_layers"][layer])


def weights(g: Graph, c: ModelConfig, layer: int, params: Dict[str, Tensor]) -> None:
    """Declares a sparse layer's parameters, in the engine's order, with their HF names."""
    moe, hidden = c.moe, c.hidden_size
    experts, width, shared = moe["experts"], moe["expert_intermediate_size"], moe["shared_expert_intermediate_size"]
    mixtral = c.model_type == "mixtral"
    names = MIXTRAL_WEIGHT_NAMES if mixtral else QWEN_MOE_WEIGHT_NAMES

    def add(pattern: str, shape, p: str = "") -> None:
        name = pattern.format(i=layer, p=p)
        hf = names[pattern].format(i=layer, p=p, hf=MIXTRAL_EXPERT_PROJECTIONS.get(p, p) if mixtral else p)
        params[name] = g.parameter(name, shape, hf=hf)

    add("layers.{i}.mlp.router.weight", [experts, hidden])
    for projection, shape in (("gate_proj", [experts, width, hidden]), ("up_proj", [experts, width, hidden]),
                              ("down_proj", [experts, hidden, width])):
        add("layers.{i}.mlp.experts.{p}.weight", shape, projection)
    if shared > 0:
        for projection, shape in (("gate_proj", [shared, hidden]), ("up_proj", [shared, hidden]),
                                  ("down_proj", [hidden, shared])):
            add("layers.{i}.mlp.shared_expert.{p}.weight", shape, projection)
        add("layers.{i}.mlp.shared_expert_gate.weight", [1, hidden])


def moe_block(g: Graph, c: ModelConfig, p: Dict[str, Tensor], layer: int, x: Tensor) -> Tensor:
    """The MoE block of ``layer`` on the normalised hidden states ``x`` [B, T, H] (inside the layer's scope)."""
    moe, prefix = c.moe, f"layers.{layer}.mlp"
    with g.recompute("ffn"):
        logits = g.ops.linear(x, p[f"{prefix}.router.weight"], name="router")
        weights, indices, _ = g.ops.router_topk(logits, top_k=moe["experts_per_token"],
                                                normalize=moe["normalize_top_k"], name="route")
        order, position, offsets = g.ops.moe_dispatch(indices, experts=moe["experts"], name="dispatch")
        tokens = g.ops.moe_permute(x, order, position, name="permute")

        def expert(inputs: Tensor, projection: str, label: str) -> Tensor:
            return g.ops.expert_linear(inputs, p[f"{prefix}.experts.{projection}.weight"], offsets, name=label)

        gate, up = expert(tokens, "gate_proj", "experts_gate"), expert(tokens, "up_proj", "experts_up")
        with g.recompute("swiglu"):
            activated = g.ops.swiglu(gate, up, name="experts_swiglu")
        out = g.ops.moe_unpermute(expert(activated, "down_proj", "experts_down"), weights, position,
                                  name="experts_out")
        if moe["shared_expert_intermediate_size"] > 0:
            out = shared_expert(g, p, prefix, x, out)
        return out


def shared_expert(g: Graph, p: Dict[str, Tensor], prefix: str, x: Tensor, routed: Tensor) -> Tensor:
    """Qwen2-MoE: routed + sigmoid(linear(x, shared_expert_gate)) · SwiGLU shared expert(x)."""
    def linear(inputs: Tensor, weight: str, label: str) -> Tensor:
        return g.ops.linear(inputs, p[f"{prefix}.{weight}.weight"], name=label)

    gate, up = linear(x, "shared_expert.gate_proj", "shared_gate"), linear(x, "shared_expert.up_proj", "shared_up")
    with g.recompute("swiglu"):
        activated = g.ops.swiglu(gate, up, name="shared_swiglu")
    out = linear(activated, "shared_expert.down_proj", "shared_down")
    gate_logit = linear(x, "shared_expert_gate", "shared_expert_gate")
    return g.ops.sigmoid_gated_add(routed, out, gate_logit, name="moe_out")
