#!/usr/bin/env python3
"""Writes a Hugging Face model folder the `surogate` CLI can train: a Qwen3 or Qwen3-MoE shape of
bench/models.py with random bf16 weights (config.json, model-0000N-of-0000M.safetensors with
model.safetensors.index.json, as HF writes them) and the real Qwen3 tokenizer
(tests/fixtures/tokenizers/qwen3, unpacked).

  python3 bench/cli/make_hf_model.py MODEL OUTPUT_DIR [LAYERS]   (MODEL: qwen3-0.6b, qwen3-8b,
                                                                  qwen3-moe-2b, qwen3-30b-a3b, ...)
LAYERS, when given, keeps the model's shapes with that many layers (bench/profile_cli.sh).
GPT-NeoX shapes are built and saved by transformers itself (its random init).
MoE models get the checkpoint layout transformers saves: one tensor per expert
(model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight) and the router model.layers.N.mlp.gate.weight.

Weights: N(0, 0.02) for matrices, 1 for norms, drawn on the GPU when there is one (torch), so an
8B folder takes seconds plus the disk write. Shards of at most 4 GiB.
"""
import json
import pathlib
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from models import MODELS  # noqa: E402

SHARD_BYTES = 4 << 30


def parameter_shapes(config: dict) -> list:
    h, i = config["hidden_size"], config["intermediate_size"]
    heads, kv, d = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    shapes = [("model.embed_tokens.weight", (config["vocab_size"], h))]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        shapes += [(f"{p}.input_layernorm.weight", (h,)), (f"{p}.post_attention_layernorm.weight", (h,)),
                   (f"{p}.self_attn.q_proj.weight", (heads * d, h)), (f"{p}.self_attn.k_proj.weight", (kv * d, h)),
                   (f"{p}.self_attn.v_proj.weight", (kv * d, h)), (f"{p}.self_attn.o_proj.weight", (h, heads * d)),
                   (f"{p}.self_attn.q_norm.weight", (d,)), (f"{p}.self_attn.k_norm.weight", (d,))]
        if config.get("model_type") == "qwen3_moe":
            e, w = config["num_experts"], config["moe_intermediate_size"]
            shapes.append((f"{p}.mlp.gate.weight", (e, h)))
            for expert in range(e):
                q = f"{p}.mlp.experts.{expert}"
                shapes += [(f"{q}.gate_proj.weight", (w, h)), (f"{q}.up_proj.weight", (w, h)), (f"{q}.down_proj.weight", (h, w))]
            continue
        shapes += [(f"{p}.mlp.gate_proj.weight", (i, h)), (f"{p}.mlp.up_proj.weight", (i, h)),
                   (f"{p}.mlp.down_proj.weight", (h, i))]
    shapes.append(("model.norm.weight", (h,)))
    if not config["tie_word_embeddings"]:
        shapes.append(("lm_head.weight", (config["vocab_size"], h)))
    return shapes


def main() -> None:
    import torch
    from safetensors.torch import save_file

    name, out = sys.argv[1], pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    config = MODELS[name].hf_config()
    if len(sys.argv) > 3:
        config["num_hidden_layers"] = int(sys.argv[3])
    (out / "config.json").write_text(json.dumps(config, indent=2))
    with tarfile.open(ROOT / "tests/fixtures/tokenizers/qwen3/tokenizer.tar.xz") as archive:
        archive.extractall(out)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if config["model_type"] == "gpt_neox":  # no hand-written table: transformers writes its own layout
        import transformers
        settings = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}
        torch.manual_seed(0)
        with torch.device(device):
            model = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**settings)).to(torch.bfloat16)
        model.save_pretrained(out, max_shard_size="4GB")
        print(f"{name}: {sum(p.numel() for p in model.parameters()) * 2 / 2**30:.1f} GiB -> {out}")
        return
    generator = torch.Generator(device=device).manual_seed(0)
    shards, current, size = [], {}, 0
    for tensor_name, shape in parameter_shapes(config):
        if len(shape) == 1:
            value = torch.ones(shape, dtype=torch.bfloat16)
        else:
            value = (torch.randn(shape, generator=generator, device=device, dtype=torch.float32) * 0.02)
            value = value.to(torch.bfloat16).cpu()
        nbytes = value.numel() * 2
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[tensor_name] = value
        size += nbytes
    shards.append(current)
    weight_map, total = {}, 0
    for index, shard in enumerate(shards):
        file = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out / file), metadata={"format": "pt"})
        for tensor_name, value in shard.items():
            weight_map[tensor_name] = file
            total += value.numel() * 2
    index_json = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index_json, indent=2))
    print(f"{name}: {total / 2**30:.1f} GiB in {len(shards)} shards -> {out}")


if __name__ == "__main__":
    main()
