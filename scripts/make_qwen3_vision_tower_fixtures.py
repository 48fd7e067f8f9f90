#!/usr/bin/env python3
"""Writes tests/fixtures/vision/qwen3_tower/: a tiny random Qwen3-VL vision tower (config.json of a
Qwen3VLForConditionalGeneration folder, model.safetensors with its `visual.*` weights in fp32) and
expected.safetensors, what transformers' Qwen3VLVisionModel makes of three images of different
grids: the bilinear position-embedding taps and weights
(get_vision_interpolation_indices_and_weights, transposed to [4, patches]), the merged features
(pooler_output), the DeepStack features in transformers' order and, for the loss
sum(features · p) + Σ_i sum(deepstack_i · p_i) with fixed random projections, the gradients of a
few weights. tests/models/test_qwen3_vision_tower.cpp asserts the engine's tower graph
(models/qwen3_vision_tower.h) gives the same on the CPU backend.

The tower: depth 3, hidden 16, 2 heads, patch 4, a 6 × 6 position grid (num_position_embeddings
36) read at grids 10 × 6 (rows upsampled, columns as stored), 4 × 8 (rows down, columns up) and a
two-frame 4 × 4, so each frame is its own attention segment; deepstack_visual_indexes [2, 0]
(unsorted: feature 0 comes from block 0 through merger 1). Weights random (norm weights around 1,
biases around 0); pixel_values random normals.

Run from the repository root: python3 scripts/make_qwen3_vision_tower_fixtures.py (transformers 5,
torch, safetensors). Deterministic (fixed seed, fp32 on the CPU).
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers import Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
from transformers.vision_utils import get_vision_interpolation_indices_and_weights

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_vision_tower_fixtures import random_pixel_values  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision" / "qwen3_tower"

VISION = dict(depth=3, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24, patch_size=4,
              spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=36, deepstack_visual_indexes=[2, 0])
TEXT = dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            head_dim=12, vocab_size=160,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 2, 2],
                             "mrope_interleaved": True})
GRIDS = [[1, 10, 6], [1, 4, 8], [2, 4, 4]]
GRADIENTS = ["patch_embed.proj.weight", "patch_embed.proj.bias", "pos_embed.weight", "blocks.0.attn.qkv.weight",
             "blocks.1.norm1.bias", "blocks.2.mlp.linear_fc1.weight", "merger.norm.weight", "merger.linear_fc2.bias",
             "deepstack_merger_list.0.norm.bias", "deepstack_merger_list.1.linear_fc1.weight"]


def randomize(model):
    """Every weight random: norm weights 1 + N(0, 0.1), the rest N(0, 0.2) (the torch seed set before)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                parameter.copy_(1.0 + 0.1 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.2 * torch.randn_like(parameter))
    return model


def random_tower(vision_config, seed):
    torch.manual_seed(seed)
    vision_config._attn_implementation = "eager"
    return randomize(Qwen3VLVisionModel(vision_config).float().eval())


def run_tower(model, grids, seed, gradients):
    """pixel_values, the features, the projections and the gradients of the projected sum."""
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    pixel_values, grid_thw = random_pixel_values(config, grids, generator)
    model.zero_grad()
    output = model(pixel_values, grid_thw=grid_thw)
    features, deepstack = output.pooler_output, output.deepstack_features
    projection = torch.randn(features.shape, generator=generator)
    projections = [torch.randn(feature.shape, generator=generator) for feature in deepstack]
    loss = (features * projection).sum() + sum((f * p).sum() for f, p in zip(deepstack, projections))
    loss.backward()
    parameters = dict(model.named_parameters())
    taps, weights = get_vision_interpolation_indices_and_weights(
        grid_thw, num_grid_per_side=int(config.num_position_embeddings ** 0.5), mode="bilinear", align_corners=True,
        spatial_merge_size=config.spatial_merge_size)
    expected = {"pixel_values": pixel_values, "grid_thw": grid_thw.to(torch.int32), "projection": projection,
                "features": features.detach(), "interpolation_taps": taps.t().contiguous().to(torch.int32),
                "interpolation_weights": weights.t().contiguous().float()}
    for i, (feature, p) in enumerate(zip(deepstack, projections)):
        expected[f"deepstack.{i}"] = feature.detach()
        expected[f"projection.{i}"] = p
    for name in gradients:
        expected["grad.visual." + name] = parameters[name].grad.detach().clone()
    return expected


def main():
    config = Qwen3VLConfig(vision_config=VISION, text_config=TEXT)
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    model = random_tower(config.vision_config, 0)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.json").write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    save_file({"visual." + name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()},
              str(OUT / "model.safetensors"))
    expected = run_tower(model, GRIDS, 1, GRADIENTS)
    save_file({name: tensor.contiguous() for name, tensor in expected.items()}, str(OUT / "expected.safetensors"))
    print(f"wrote {OUT}: features {tuple(expected['features'].shape)}, {len(VISION['deepstack_visual_indexes'])} "
          "DeepStack features")


if __name__ == "__main__":
    main()
