"""GPT-NeoX (transformers' GPTNeoXForCausalLM: Pythia, GPT-NeoX-20B), written with surogate.dsl.

The engine has no C++ for this architecture: config.json's ``GPTNeoXForCausalLM`` loads because
this definition brings the graph and names every weight as the checkpoint stores it. What differs
from the Llama family, all of it wiring of existing ops:

- LayerNorm with bias (``layernorm``) instead of RMSNorm, eps from config.json's ``layer_norm_eps``;
- GELU (``gelu``, erf or tanh form from ``hidden_act``) in a two-matrix MLP with biases
  (``dense_h_to_4h`` -> gelu -> ``dense_4h_to_h``);
- one fused ``query_key_value`` projection [3·H, H] with bias, interleaved per head: the rows of
  head h are its q, k and v (head_dim each) one after the other. The checkpoint tensor stays as it
  is (so saving writes it back unchanged and LoRA adapts ``query_key_value`` as PEFT does); the
  graph splits the projection's output into 3·heads slices and concatenates q, k, v back
  (``split`` / ``concat``);
- partial rotary (``rotary_pct`` / ``partial_rotary_factor``): the engine's RoPE tables cover the
  first rotary_dim features of each head (``c.rope``), the rope op passes the rest through;
- parallel residual (``use_parallel_residual``, default true): x + attn(ln1(x)) + mlp(ln2(x));
  false gives the sequential block h = x + attn(ln1(x)), h + mlp(ln2(h));
- the ``gpt_neox.`` prefix, ``embed_in`` / ``embed_out``, ``final_layer_norm``.

    python -m surogate.dsl examples/dsl/gpt_neox.py --model MODEL_DIR --batch 4 --seq 64 -o neox.json
    surogate sft config.yaml --model_definition=neox.json        # B, T = per_device_train_batch_size, sequence_len
    surogate.train(config, model_definition="examples/dsl/gpt_neox.py")

tests/python/test_dsl_gpt_neox.py checks the loss against transformers' fp32 loss, trains it and
loads the saved folder back into transformers. docs/models.md walks through it.
"""
from typing import Dict

from surogate import dsl
from surogate.dsl.decoder import inputs, lm_head_loss, rope_tables

# transformers' ACT2FN names -> the gelu op's `approximate`.
GELU_FORMS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}


def gpt_neox_weights(g: dsl.Graph, c: dsl.ModelConfig) -> Dict[str, dsl.Tensor]:
    """Every parameter, engine name -> tensor, each declared with its name in the checkpoint."""
    hidden, inner = c.hidden_size, c.intermediate_size
    params: Dict[str, dsl.Tensor] = {}

    def add(name: str, hf: str, shape) -> None:
        params[name] = g.parameter(name, shape, hf=hf)

    def norm(name: str, hf: str) -> None:
        add(f"{name}.weight", f"{hf}.weight", [hidden])
        add(f"{name}.bias", f"{hf}.bias", [hidden])

    def linear(name: str, hf: str, out: int, inp: int, bias: bool = True) -> None:
        add(f"{name}.weight", f"{hf}.weight", [out, inp])
        if bias:
            add(f"{name}.bias", f"{hf}.bias", [out])

    add("embed.weight", "gpt_neox.embed_in.weight", [c.vocab_size, hidden])
    bias = c.get("attention_bias", True)
    for i in range(c.num_hidden_layers):
        engine, hf = f"layers.{i}.", f"gpt_neox.layers.{i}."
        norm(engine + "input_layernorm", hf + "input_layernorm")
        norm(engine + "post_attention_layernorm", hf + "post_attention_layernorm")
        linear(engine + "attention.query_key_value", hf + "attention.query_key_value", 3 * hidden, hidden, bias)
        linear(engine + "attention.dense", hf + "attention.dense", hidden, hidden, bias)
        linear(engine + "mlp.dense_h_to_4h", hf + "mlp.dense_h_to_4h", inner, hidden)
        linear(engine + "mlp.dense_4h_to_h", hf + "mlp.dense_4h_to_h", hidden, inner)
    norm("final_norm", "gpt_neox.final_layer_norm")
    if not c.tie_word_embeddings:
        add("lm_head.weight", "embed_out.weight", [c.vocab_size, hidden])
    return params


def linear(g: dsl.Graph, p: Dict[str, dsl.Tensor], x: dsl.Tensor, prefix: str, label: str) -> dsl.Tensor:
    operands = [x, p[prefix + ".weight"]] + ([p[prefix + ".bias"]] if prefix + ".bias" in p else [])
    return g.ops.linear(*operands, name=label)


def layernorm(g: dsl.Graph, p: Dict[str, dsl.Tensor], x: dsl.Tensor, prefix: str, eps: float, label: str):
    return g.ops.layernorm(x, p[prefix + ".weight"], p[prefix + ".bias"], eps=eps, name=label)[0]


@dsl.model(name="gpt_neox")
def gpt_neox(g: dsl.Graph, c: dsl.ModelConfig) -> None:
    if c.hidden_act not in GELU_FORMS:
        raise ValueError(f"hidden_act '{c.hidden_act}': this definition computes {', '.join(GELU_FORMS)}")
    batch = inputs(g)
    p = gpt_neox_weights(g, c)
    cos, sin = rope_tables(g, c, batch)        # rotary_dim = head_dim · partial_rotary_factor
    heads, head_dim, eps = c.num_attention_heads, c.head_dim, c.get("layer_norm_eps", 1e-5)
    parallel = c.get("use_parallel_residual", True)
    stream = g.ops.embedding(batch["input_ids"], p["embed.weight"], name="embed")
    for layer in range(c.num_hidden_layers):
        prefix = f"layers.{layer}"
        with g.scope(prefix):
            with g.recompute("rmsnorm"):
                attention_in = layernorm(g, p, stream, f"{prefix}.input_layernorm", eps, "ln1")
            with g.recompute("qkv"):
                qkv = linear(g, p, attention_in, f"{prefix}.attention.query_key_value", "qkv")   # [B, T, 3·H]
                # Per head h: columns [3h·d, 3h·d + d) are q, then k, then v.
                pieces = g.ops.split(qkv, axis=2, sizes=[head_dim] * (3 * heads), name="qkv_split")
                q = g.ops.concat(*pieces[0::3], axis=2, name="q")
                k = g.ops.concat(*pieces[1::3], axis=2, name="k")
                v = g.ops.concat(*pieces[2::3], axis=2, name="v")
                q = g.ops.rope(q, cos, sin, heads=heads, head_dim=head_dim, name="q_rope")
                k = g.ops.rope(k, cos, sin, heads=heads, head_dim=head_dim, name="k_rope")
            with g.recompute("att"):
                context = g.ops.attention(q, k, v, batch["document_ids"], query_heads=heads, kv_heads=heads,
                                          head_dim=head_dim, name="attention")[0]
                attention_out = linear(g, p, context, f"{prefix}.attention.dense", "o")
            if not parallel:
                stream = g.ops.add(stream, attention_out, name="attention_residual")
            with g.recompute("rmsnorm"):
                mlp_in = layernorm(g, p, stream, f"{prefix}.post_attention_layernorm", eps, "ln2")
            with g.recompute("ffn"):
                up = linear(g, p, mlp_in, f"{prefix}.mlp.dense_h_to_4h", "up")
                activated = g.ops.gelu(up, approximate=GELU_FORMS[c.hidden_act], name="gelu")
                mlp_out = linear(g, p, activated, f"{prefix}.mlp.dense_4h_to_h", "down")
            if parallel:
                attention_out = g.ops.add(stream, attention_out, name="attention_residual")
            stream = g.ops.add(attention_out if parallel else stream, mlp_out, name="residual")
    final = layernorm(g, p, stream, "final_norm", eps, "final_norm")
    lm_head_loss(g, c, p, batch, final)
