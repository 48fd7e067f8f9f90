"""Phi-3 (transformers' Phi3ForCausalLM: Phi-3-mini / medium, Phi-4-mini), written with surogate.dsl.

The engine has no C++ for this architecture. Its block is Llama's (RMSNorm, RoPE attention with
GQA, SwiGLU MLP), but its checkpoint fuses the projections, and this definition keeps them fused:

- ``self_attn.qkv_proj`` [(heads + 2·kv_heads)·head_dim, H]: the q rows, then k, then v. The graph
  splits the projection's output in three (``split``);
- ``mlp.gate_up_proj`` [2·I, H]: the gate rows, then up — exactly what ``swiglu_fused`` reads
  (silu of the first half times the second), so no split at all;
- partial rotary when config.json sets ``partial_rotary_factor`` (Phi-4-mini), a sliding window when
  it sets ``sliding_window`` (the Phi-3 releases; null: full attention).

Both fused tensors are saved back as they were read, and LoRA adapts them as PEFT does
(``lora_target_modules: [qkv_proj, gate_up_proj, o_proj, down_proj]``).

    python -m surogate.dsl examples/dsl/phi3.py --model MODEL_DIR --batch 4 --seq 64 -o phi3.json
    surogate sft config.yaml --model_definition=phi3.json

tests/python/test_dsl_phi3.py checks its loss against transformers' and trains it.
"""
from typing import Dict

from surogate import dsl
from surogate.dsl.decoder import inputs, rope_tables


def phi3_weights(g: dsl.Graph, c: dsl.ModelConfig) -> Dict[str, dsl.Tensor]:
    """Every parameter, engine name -> tensor, each declared with its name in the checkpoint."""
    hidden, inner = c.hidden_size, c.intermediate_size
    qkv_width = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim
    params: Dict[str, dsl.Tensor] = {}

    def add(name: str, shape) -> None:  # engine name = checkpoint name without "model."
        params[name] = g.parameter(name, shape, hf=name if name == "lm_head.weight" else f"model.{name}")

    add("embed_tokens.weight", [c.vocab_size, hidden])
    for i in range(c.num_hidden_layers):
        add(f"layers.{i}.input_layernorm.weight", [hidden])
        add(f"layers.{i}.self_attn.qkv_proj.weight", [qkv_width, hidden])
        add(f"layers.{i}.self_attn.o_proj.weight", [hidden, c.num_attention_heads * c.head_dim])
        add(f"layers.{i}.post_attention_layernorm.weight", [hidden])
        add(f"layers.{i}.mlp.gate_up_proj.weight", [2 * inner, hidden])
        add(f"layers.{i}.mlp.down_proj.weight", [hidden, inner])
    add("norm.weight", [hidden])
    if not c.tie_word_embeddings:
        add("lm_head.weight", [c.vocab_size, hidden])
    return params


@dsl.model(name="phi3")
def phi3(g: dsl.Graph, c: dsl.ModelConfig) -> None:
    if c.hidden_act != "silu":
        raise ValueError(f"hidden_act '{c.hidden_act}': Phi-3's MLP is SwiGLU (silu)")
    batch = inputs(g)
    p = phi3_weights(g, c)
    cos, sin = rope_tables(g, c, batch)
    heads, kv_heads, head_dim, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
    window = c.get("sliding_window") or 0
    stream = g.ops.embedding(batch["input_ids"], p["embed_tokens.weight"], name="embed")
    for layer in range(c.num_hidden_layers):
        prefix = f"layers.{layer}"
        with g.scope(prefix):
            with g.recompute("rmsnorm"):
                attention_in = g.ops.rmsnorm(stream, p[f"{prefix}.input_layernorm.weight"], eps=eps, name="ln1")[0]
            with g.recompute("qkv"):
                qkv = g.ops.linear(attention_in, p[f"{prefix}.self_attn.qkv_proj.weight"], name="qkv")
                q, k, v = g.ops.split(qkv, axis=2, sizes=[heads * head_dim, kv_heads * head_dim, kv_heads * head_dim],
                                      name="qkv_split")
                q = g.ops.rope(q, cos, sin, heads=heads, head_dim=head_dim, name="q_rope")
                k = g.ops.rope(k, cos, sin, heads=kv_heads, head_dim=head_dim, name="k_rope")
            with g.recompute("att"):
                context = g.ops.attention(q, k, v, batch["document_ids"], query_heads=heads, kv_heads=kv_heads,
                                          head_dim=head_dim, window=window, name="attention")[0]
                attention_out = g.ops.linear(context, p[f"{prefix}.self_attn.o_proj.weight"], name="o")
            stream = g.ops.add(stream, attention_out, name="attention_residual")
            with g.recompute("rmsnorm"):
                mlp_in = g.ops.rmsnorm(stream, p[f"{prefix}.post_attention_layernorm.weight"], eps=eps, name="ln2")[0]
            with g.recompute("ffn"):
                gate_up = g.ops.linear(mlp_in, p[f"{prefix}.mlp.gate_up_proj.weight"], name="gate_up")
                activated = g.ops.swiglu_fused(gate_up, name="swiglu")
                mlp_out = g.ops.linear(activated, p[f"{prefix}.mlp.down_proj.weight"], name="down")
            stream = g.ops.add(stream, mlp_out, name="residual")
    final = g.ops.rmsnorm(stream, p["norm.weight"], eps=eps, name="final_norm")[0]
    head = p["embed_tokens.weight"] if c.tie_word_embeddings else p["lm_head.weight"]
    loss = g.ops.lm_head_loss(final, head, batch["targets"], batch["loss_scale"], chunks=max(1, g.lmhead_chunks),
                              name="loss")[0]
    g.output(loss)                       # the first output: loss_scale · Σ token cross-entropy
