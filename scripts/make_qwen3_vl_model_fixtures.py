#!/usr/bin/env python3
"""Writes tests/fixtures/vision/qwen3_vl_model/: a tiny random Qwen3VLForConditionalGeneration
(config.json, model.safetensors in fp32 under transformers 5's names: model.visual.*,
model.language_model.*, lm_head.*) and expected.safetensors: two rows, the first with two images
of different grids, the second with a two-frame one, the labels (-100 outside the assistant
tail), transformers' interleaved M-RoPE position ids (get_rope_index), the fp32 loss
(transformers' shifted mean cross-entropy) and the gradients of a few text and tower weights.
tests/models/test_qwen3_vl_model.cpp asserts the engine's graph (models/qwen3_vl_model.h) gives
the same on the CPU backend.

The tower is the one of make_qwen3_vision_tower_fixtures.py (depth 3, DeepStack after blocks
[2, 0], a 6 × 6 position grid); the text model is Qwen3 (q/k norms) with 2 layers, hidden 24, 2
query heads and 1 KV head of head_dim 16 (the CUDA q/k norms need a multiple of 8), interleaved M-RoPE sections [4, 2, 2], a vocabulary of
160 holding the vision token ids; DeepStack features are added after both text layers.

Run from the repository root: python3 scripts/make_qwen3_vl_model_fixtures.py (transformers 5,
torch, safetensors). Deterministic (fixed seed, fp32 on the CPU).
"""
import pathlib
import sys

import torch
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_qwen3_vision_tower_fixtures import VISION, randomize  # noqa: E402
from make_vision_model_fixtures import write_fixture  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision" / "qwen3_vl_model"

TEXT = dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            head_dim=16, vocab_size=160, max_position_embeddings=256, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                             "mrope_interleaved": True})
TOKENS = dict(image_token_id=151, video_token_id=152, vision_start_token_id=153, vision_end_token_id=154)
GRIDS = [[1, 10, 6], [1, 4, 8], [2, 4, 4]]
ROWS = [[0, 1], [2]]  # the images of each row, in GRIDS' order
LENGTH = 51
GRADIENTS = ["model.language_model.embed_tokens.weight", "model.language_model.layers.0.self_attn.q_proj.weight",
             "model.language_model.layers.0.self_attn.q_norm.weight",
             "model.language_model.layers.1.self_attn.k_norm.weight",
             "model.language_model.layers.1.mlp.down_proj.weight", "model.language_model.norm.weight",
             "lm_head.weight", "model.visual.patch_embed.proj.weight", "model.visual.pos_embed.weight",
             "model.visual.blocks.1.attn.qkv.weight", "model.visual.merger.linear_fc2.weight",
             "model.visual.deepstack_merger_list.0.linear_fc1.weight",
             "model.visual.deepstack_merger_list.1.norm.weight"]


def make_config(vision, text):
    config = Qwen3VLConfig(vision_config=vision, text_config=text, **TOKENS)
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    return config


def random_model(config, seed):
    torch.manual_seed(seed)
    return randomize(Qwen3VLForConditionalGeneration(config).float().eval())


def main():
    config = make_config(VISION, TEXT)
    write_fixture(OUT, config, random_model(config, 0), GRIDS, ROWS, LENGTH, GRADIENTS)


if __name__ == "__main__":
    main()
