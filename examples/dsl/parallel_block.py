"""A decoder whose blocks run attention and the MLP side by side, written with surogate.dsl.

GPT-J / GPT-NeoX ("use_parallel_residual") compute both halves of a block from the same input
stream and add both to it: x + attention(ln1(x)) + mlp(ln2(x)), where the Llama family adds
attention first and feeds the MLP the updated stream. This definition keeps the Llama weights
(so a Llama config.json and checkpoint load as they are) and changes only the wiring, with ops the
engine already has: no C++ was written for it. docs/models.md walks through it;
tests/python/test_dsl.py trains it.

    python -m surogate.dsl examples/dsl/parallel_block.py --model MODEL_DIR --batch 16 --seq 64 -o block.json
    surogate.train(config, model_definition="examples/dsl/parallel_block.py")
"""
from surogate import dsl
from surogate.dsl.decoder import inputs, lm_head_loss, projection, rope_tables, weights


@dsl.model(name="parallel_block")
def parallel_block(g: dsl.Graph, c: dsl.ModelConfig) -> None:
    batch = inputs(g)
    p = weights(g, c)
    cos, sin = rope_tables(g, c, batch)
    stream = g.ops.embedding(batch["input_ids"], p["embed.weight"], name="embed")
    heads, kv_heads, head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    for layer in range(c.num_hidden_layers):
        prefix = f"layers.{layer}"
        with g.scope(prefix):
            with g.recompute("rmsnorm"):
                attention_in = g.ops.rmsnorm(stream, p[f"{prefix}.ln1.weight"], eps=c.rms_norm_eps, name="ln1")[0]
                mlp_in = g.ops.rmsnorm(stream, p[f"{prefix}.ln2.weight"], eps=c.rms_norm_eps, name="ln2")[0]
            with g.recompute("qkv"):
                q = projection(g, p, attention_in, f"{prefix}.attn.q_proj", "q")
                k = projection(g, p, attention_in, f"{prefix}.attn.k_proj", "k")
                v = projection(g, p, attention_in, f"{prefix}.attn.v_proj", "v")
                q = g.ops.rope(q, cos, sin, heads=heads, head_dim=head_dim, name="q_rope")
                k = g.ops.rope(k, cos, sin, heads=kv_heads, head_dim=head_dim, name="k_rope")
            with g.recompute("att"):
                context = g.ops.attention(q, k, v, batch["document_ids"], query_heads=heads, kv_heads=kv_heads,
                                          head_dim=head_dim, window=c.sliding_window_per_layer[layer],
                                          name="attention")[0]
                attention_out = projection(g, p, context, f"{prefix}.attn.o_proj", "o")
            with g.recompute("ffn"):
                gate = projection(g, p, mlp_in, f"{prefix}.mlp.gate_proj", "gate")
                up = projection(g, p, mlp_in, f"{prefix}.mlp.up_proj", "up")
                mlp_out = projection(g, p, g.ops.swiglu(gate, up, name="swiglu"), f"{prefix}.mlp.down_proj", "down")
            stream = g.ops.add(g.ops.add(stream, attention_out, name="attention_residual"), mlp_out, name="residual")
    final = g.ops.rmsnorm(stream, p["final_norm.weight"], eps=c.rms_norm_eps, name="final_norm")[0]
    lm_head_loss(g, c, p, batch, final)
