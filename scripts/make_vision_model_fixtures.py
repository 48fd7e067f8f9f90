#!/usr/bin/env python3
"""Writes tests/fixtures/vision/vl/: a tiny random Qwen2_5_VLForConditionalGeneration (config.json,
model.safetensors in fp32 under transformers 5's names: model.visual.*, model.language_model.*,
lm_head.*) and expected.safetensors: two rows, the first with two images of different grids, the second with a third image, the
labels (input ids with -100 outside the assistant part), transformers' M-RoPE position ids, the
fp32 loss (transformers' shifted mean cross-entropy) and the gradients of a few text and tower
weights. tests/models/test_vision_model.cpp asserts the engine's graph (models/vision_model.h)
gives the same on the CPU backend.

The tower is the one of make_vision_tower_fixtures.py (depth 4, block 2 fully attending, hidden
16, patch 4, window 16); the text model has 2 layers, hidden 24, 2 query heads and 1 KV head of
head_dim 12, M-RoPE sections [2, 2, 2], a vocabulary of 160 holding the vision token ids.

Run from the repository root: python3 scripts/make_vision_model_fixtures.py (transformers 5, torch,
safetensors). Deterministic (fixed seed, fp32 on the CPU).
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_vision_tower_fixtures import randomize  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision" / "vl"

VISION = dict(depth=4, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24, patch_size=4,
              window_size=16, fullatt_block_indexes=[2], spatial_merge_size=2, temporal_patch_size=2)
TEXT = dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            vocab_size=160, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=155, eos_token_id=156,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 2, 2]})
TOKENS = dict(image_token_id=151, video_token_id=152, vision_start_token_id=153, vision_end_token_id=154)
GRIDS = [[1, 10, 6], [1, 6, 8], [1, 6, 8]]
ROWS = [[0, 1], [2]]  # the images of each row, in GRIDS' order
LENGTH = 51
GRADIENTS = ["model.language_model.embed_tokens.weight", "model.language_model.layers.0.self_attn.q_proj.weight",
             "model.language_model.layers.0.self_attn.k_proj.bias", "model.language_model.layers.1.mlp.down_proj.weight",
             "model.language_model.norm.weight", "lm_head.weight", "model.visual.patch_embed.proj.weight",
             "model.visual.blocks.2.attn.qkv.weight", "model.visual.merger.mlp.2.weight"]


def random_model(config, seed):
    torch.manual_seed(seed)
    return randomize(Qwen2_5_VLForConditionalGeneration(config).float().eval())


def make_row(grids, merge, length, generator):
    """Text tokens (ids < 150) to fill `length`, each image as vision_start, its pads, vision_end;
    labels only on the assistant part (the last 9 tokens, after the last image)."""
    def text(n):
        return torch.randint(0, 150, (n,), generator=generator).tolist()
    body = []
    for t, h, w in grids:
        body += [TOKENS["vision_start_token_id"]] + [TOKENS["image_token_id"]] * (t * h * w // merge ** 2)
        body += [TOKENS["vision_end_token_id"]] + text(3)
    ids = text(length - len(body) - 9) + body
    prompt = len(ids)
    ids += text(9)
    return ids, [-100] * prompt + ids[prompt:]


def run_model(model, grids, rows, length, seed, gradients):
    """Rows of `length` tokens (row r holding the images rows[r] of `grids`), random pixel_values;
    the inputs, transformers' positions, the loss and the gradients of `gradients`."""
    vision = model.config.vision_config
    generator = torch.Generator().manual_seed(seed)
    made = [make_row([grids[i] for i in images], vision.spatial_merge_size, length, generator) for images in rows]
    input_ids = torch.tensor([ids for ids, _ in made])
    labels = torch.tensor([row_labels for _, row_labels in made])
    columns = vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2
    pixel_values = torch.randn(sum(t * h * w for t, h, w in grids), columns, generator=generator)
    grid_thw = torch.tensor(grids)
    mm_token_type_ids = (input_ids == model.config.image_token_id).to(torch.int32)
    position_ids, _ = model.model.get_rope_index(input_ids, mm_token_type_ids, image_grid_thw=grid_thw)
    model.zero_grad()
    out = model(input_ids=input_ids, pixel_values=pixel_values, image_grid_thw=grid_thw, labels=labels,
                mm_token_type_ids=mm_token_type_ids)
    out.loss.backward()
    parameters = dict(model.named_parameters())
    return {"input_ids": input_ids.to(torch.int32), "labels": labels.to(torch.int32),
            "position_ids": position_ids.to(torch.int32), "pixel_values": pixel_values,
            "grid_thw": grid_thw.to(torch.int32), "loss": out.loss.detach().reshape(1),
            **{"grad." + name: parameters[name].grad.detach().clone() for name in gradients}}


def make_config(vision, text):
    config = Qwen2_5_VLConfig(vision_config=vision, text_config=text, **TOKENS)
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    return config


def write_fixture(out, config, model, grids, rows, length, gradients):
    """config.json, model.safetensors and expected.safetensors (run_model's) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    save_file({name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()},
              str(out / "model.safetensors"))
    expected = run_model(model, grids, rows, length, 1, gradients)
    save_file({name: tensor.contiguous() for name, tensor in expected.items()}, str(out / "expected.safetensors"))
    print(f"wrote {out}: loss {expected['loss'].item():.6f}, input ids {tuple(expected['input_ids'].shape)}")


def main():
    config = make_config(VISION, TEXT)
    write_fixture(OUT, config, random_model(config, 0), GRIDS, ROWS, LENGTH, GRADIENTS)


if __name__ == "__main__":
    main()
