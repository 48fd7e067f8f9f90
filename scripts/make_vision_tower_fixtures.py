#!/usr/bin/env python3
"""Writes tests/fixtures/vision/tower/: a tiny random Qwen2.5-VL vision tower (config.json of a
Qwen2_5_VLForConditionalGeneration folder, model.safetensors with its `visual.*` weights in fp32)
and expected.safetensors, what transformers' Qwen2_5_VisionTransformerPretrainedModel makes of
two images of different grids: transformers' window index and window boundaries, the merged features (pooler_output, fp32) and, for the loss
sum(features · projection) with a fixed random projection, the gradients of a few weights.
tests/models/test_vision_tower.cpp asserts the engine's tower graph (models/vision_tower.h) gives
the same on the CPU backend.

The tower: depth 4 with block 2 attending fully, hidden 16, 2 heads, patch 4, window_size 16 (two
merged patches a window side), so the 10 × 6 and 6 × 8 patch grids make windows of every shape and
an empty padding window that transformers drops. Every weight is random (norm weights around 1,
biases around 0), pixel_values are random normals (the tower does not care where they came from).

Run from the repository root: python3 scripts/make_vision_tower_fixtures.py (transformers 5,
torch, safetensors). Deterministic (fixed seed, fp32 on the CPU).
"""
import json
import pathlib

import torch
from safetensors.torch import save_file
from transformers import Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
from transformers.vision_utils import get_vision_window_index

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision" / "tower"

VISION = dict(depth=4, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24, patch_size=4,
              window_size=16, fullatt_block_indexes=[2], spatial_merge_size=2, temporal_patch_size=2)
TEXT = dict(hidden_size=24, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
            vocab_size=128, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 2, 2]})
GRIDS = [[1, 10, 6], [1, 6, 8]]
# The gradients recorded: the patch embedding, a window block's qkv and MLP, the full block's
# output projection and norm, the merger.
GRADIENTS = ["patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.1.mlp.gate_proj.bias",
             "blocks.2.attn.proj.weight", "blocks.2.norm1.weight", "blocks.3.mlp.down_proj.weight", "merger.ln_q.weight",
             "merger.mlp.0.weight", "merger.mlp.2.bias"]


def random_tower(vision_config, seed):
    """The tower with every weight random: norms 1 + N(0, 0.1), the rest N(0, 0.2)."""
    torch.manual_seed(seed)
    vision_config._attn_implementation = "eager"
    return randomize(Qwen2_5_VisionTransformerPretrainedModel(vision_config).float().eval())


def randomize(model):
    """Every weight random: norms 1 + N(0, 0.1), the rest N(0, 0.2) (the torch seed set before)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or "ln_q" in name:
                parameter.copy_(1.0 + 0.1 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.2 * torch.randn_like(parameter))
    return model


def random_pixel_values(config, grids, generator):
    """Random normal pixel_values for the patches of `grids` and the grids as a tensor."""
    patches = sum(t * h * w for t, h, w in grids)
    columns = config.in_channels * config.temporal_patch_size * config.patch_size ** 2
    return torch.randn(patches, columns, generator=generator), torch.tensor(grids, dtype=torch.int64)


def run_tower(model, grids, seed, gradients):
    """pixel_values, the features, the projection and the gradients of sum(features · projection)."""
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    pixel_values, grid_thw = random_pixel_values(config, grids, generator)
    model.zero_grad()
    features = model(pixel_values, grid_thw=grid_thw).pooler_output
    projection = torch.randn(features.shape, generator=generator)
    (features * projection).sum().backward()
    parameters = dict(model.named_parameters())
    window_index, cu_window_seqlens = get_vision_window_index(
        grid_thw, spatial_merge_size=config.spatial_merge_size, window_size=config.window_size,
        patch_size=config.patch_size)
    return {"window_index": window_index.to(torch.int32), "cu_window_seqlens": cu_window_seqlens.to(torch.int32),
            "pixel_values": pixel_values, "grid_thw": grid_thw.to(torch.int32), "projection": projection,
            "features": features.detach(),
            **{"grad.visual." + name: parameters[name].grad.detach().clone() for name in gradients}}


def main():
    config = Qwen2_5_VLConfig(vision_config=VISION, text_config=TEXT)
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    model = random_tower(config.vision_config, 0)
    OUT.mkdir(parents=True, exist_ok=True)
    config_dict = config.to_dict()
    (OUT / "config.json").write_text(json.dumps(config_dict, indent=2, sort_keys=True) + "\n")
    save_file({"visual." + name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()},
              str(OUT / "model.safetensors"))
    expected = run_tower(model, GRIDS, 1, GRADIENTS)
    save_file({name: tensor.contiguous() for name, tensor in expected.items()}, str(OUT / "expected.safetensors"))
    print(f"wrote {OUT}: features {tuple(expected['features'].shape)}")


if __name__ == "__main__":
    main()
