#!/usr/bin/env python3
"""Writes tests/fixtures/vision/rows/mrope_interleaved.json: Qwen3-VL's interleaved M-RoPE tables
(transformers' Qwen3VLTextRotaryEmbedding, mrope_interleaved) at random (temporal, height, width)
positions, in float32, for Qwen3-VL-8B's head_dim 128, mrope_section [24, 20, 20] and rope_theta
5e6, and for a small head_dim 24 with sections [2, 5, 5] whose height and width runs reach the
last frequencies. tests/ops/test_mrope.cpp (Mrope.InterleavedTablesEqualTransformers) compares
ops/mrope.h's tables with them.

Run from the repository root: python3 scripts/make_interleaved_mrope_fixture.py (transformers 5,
torch). Deterministic.
"""
import json
import pathlib

import torch
from transformers import Qwen3VLTextConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision" / "rows" / "mrope_interleaved.json"
CASES = [dict(head_dim=128, mrope_section=[24, 20, 20], theta=5000000.0, tokens=9),
         dict(head_dim=24, mrope_section=[2, 5, 5], theta=10000.0, tokens=5)]


def case(spec, generator):
    config = Qwen3VLTextConfig(hidden_size=spec["head_dim"] * 2, num_attention_heads=2, num_key_value_heads=1,
                               head_dim=spec["head_dim"],
                               rope_parameters={"rope_type": "default", "rope_theta": spec["theta"],
                                                "mrope_section": spec["mrope_section"], "mrope_interleaved": True})
    rotary = Qwen3VLTextRotaryEmbedding(config)
    # Positions below 400, a few hundred tokens (float32 angles: the engine's and
    # torch's inv_freq may differ in the last bit, an error that grows with the position).
    positions = torch.randint(0, 400, (3, 1, spec["tokens"]), generator=generator)
    x = torch.zeros(1, spec["tokens"], spec["head_dim"], dtype=torch.float32)
    cos, sin = rotary(x, positions)
    half = spec["head_dim"] // 2
    return {**spec, "position_ids": positions[:, 0, :].tolist(),
            "cos": cos[0, :, :half].flatten().tolist(), "sin": sin[0, :, :half].flatten().tolist()}


def main():
    generator = torch.Generator().manual_seed(3)
    OUT.write_text(json.dumps({"cases": [case(spec, generator) for spec in CASES]}) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
