"""OLMo-2 (transformers' Olmo2ForCausalLM), written with surogate.dsl.

OLMo-2 normalises the output of each half of a block instead of its input, and normalises q and k
over the whole projection (num_heads·head_dim wide, before the heads are split), not per head:

    h   = x + post_attention_layernorm(attention(x))      q, k = q_norm(q_proj x), k_norm(k_proj x); RoPE
    out = h + post_feedforward_layernorm(mlp(h))          SwiGLU MLP

then the final norm and an untied LM head. The engine reads an OLMo-2 config.json and its weights
(models/model_spec.h names them) but has no built-in graph for it: this definition is the graph,
with ops the engine already has. docs/models.md walks through it; tests/python/test_dsl_olmo2.py
checks its loss against transformers on the same weights.

    python -m surogate.dsl examples/dsl/olmo2.py --model MODEL_DIR --batch 16 --seq 64 -o olmo2.json
    surogate.train(config, model_definition="examples/dsl/olmo2.py")
"""
from typing import Dict

from surogate import dsl
from surogate.dsl.decoder import inputs, lm_head_loss, projection, rope_tables


def olmo2_weights(g: dsl.Graph, c: dsl.ModelConfig) -> Dict[str, dsl.Tensor]:
    """The parameters in the engine's order, each with the name it has in an OLMo-2 checkpoint."""
    hidden, q_width, kv_width = c.hidden_size, c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    params: Dict[str, dsl.Tensor] = {}

    def add(name: str, hf: str, shape) -> None:
        params[name] = g.parameter(name, shape, hf=hf)

    add("embed.weight", "model.embed_tokens.weight", [c.vocab_size, hidden])
    for i in range(c.num_hidden_layers):
        engine, hf = f"layers.{i}.", f"model.layers.{i}."
        for name, out, inp in (("q_proj", q_width, hidden), ("k_proj", kv_width, hidden),
                               ("v_proj", kv_width, hidden), ("o_proj", hidden, q_width)):
            add(f"{engine}attn.{name}.weight", f"{hf}self_attn.{name}.weight", [out, inp])
            if c.qkv_bias:
                add(f"{engine}attn.{name}.bias", f"{hf}self_attn.{name}.bias", [out])
        add(f"{engine}attn.q_norm.weight", f"{hf}self_attn.q_norm.weight", [q_width])
        add(f"{engine}attn.k_norm.weight", f"{hf}self_attn.k_norm.weight", [kv_width])
        add(f"{engine}ln2.weight", f"{hf}post_attention_layernorm.weight", [hidden])
        add(f"{engine}post_mlp_norm.weight", f"{hf}post_feedforward_layernorm.weight", [hidden])
        for name, out, inp in (("gate_proj", c.intermediate_size, hidden), ("up_proj", c.intermediate_size, hidden),
                               ("down_proj", hidden, c.intermediate_size)):
            add(f"{engine}mlp.{name}.weight", f"{hf}mlp.{name}.weight", [out, inp])
    add("final_norm.weight", "model.norm.weight", [hidden])
    if not c.tie_word_embeddings:
        add("lm_head.weight", "lm_head.weight", [c.vocab_size, hidden])
    return params


@dsl.model(name="olmo2")
def olmo2(g: dsl.Graph, c: dsl.ModelConfig) -> None:
    batch = inputs(g)
    p = olmo2_weights(g, c)
    cos, sin = rope_tables(g, c, batch)
    stream = g.ops.embedding(batch["input_ids"], p["embed.weight"], name="embed")
    heads, kv_heads, head_dim, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
    for layer in range(c.num_hidden_layers):
        prefix = f"layers.{layer}"
        with g.scope(prefix):
            with g.recompute("qkv"):
                q = projection(g, p, stream, f"{prefix}.attn.q_proj", "q")
                k = projection(g, p, stream, f"{prefix}.attn.k_proj", "k")
                v = projection(g, p, stream, f"{prefix}.attn.v_proj", "v")
                q = g.ops.rmsnorm(q, p[f"{prefix}.attn.q_norm.weight"], eps=eps, name="q_norm")[0]
                k = g.ops.rmsnorm(k, p[f"{prefix}.attn.k_norm.weight"], eps=eps, name="k_norm")[0]
                q = g.ops.rope(q, cos, sin, heads=heads, head_dim=head_dim, name="q_rope")
                k = g.ops.rope(k, cos, sin, heads=kv_heads, head_dim=head_dim, name="k_rope")
            with g.recompute("att"):
                context = g.ops.attention(q, k, v, batch["document_ids"], query_heads=heads, kv_heads=kv_heads,
                                          head_dim=head_dim, window=c.sliding_window_per_layer[layer],
                                          name="attention")[0]
                attention_out = projection(g, p, context, f"{prefix}.attn.o_proj", "o")
            with g.recompute("rmsnorm"):
                attention_out = g.ops.rmsnorm(attention_out, p[f"{prefix}.ln2.weight"], eps=eps, name="ln2")[0]
            stream = g.ops.add(stream, attention_out, name="attention_residual")
            with g.recompute("ffn"):
                gate = projection(g, p, stream, f"{prefix}.mlp.gate_proj", "gate")
                up = projection(g, p, stream, f"{prefix}.mlp.up_proj", "up")
                mlp_out = projection(g, p, g.ops.swiglu(gate, up, name="swiglu"), f"{prefix}.mlp.down_proj", "down")
            with g.recompute("rmsnorm"):
                mlp_out = g.ops.rmsnorm(mlp_out, p[f"{prefix}.post_mlp_norm.weight"], eps=eps, name="post_mlp_norm")[0]
            stream = g.ops.add(stream, mlp_out, name="residual")
    final = g.ops.rmsnorm(stream, p["final_norm.weight"], eps=eps, name="final_norm")[0]
    lm_head_loss(g, c, p, batch, final)
