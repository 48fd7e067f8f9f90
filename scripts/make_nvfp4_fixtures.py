#!/usr/bin/env python3
"""Writes tests/fixtures/nvfp4/nvfp4_reference.safetensors: what the numpy oracle
tests/python/nvfp4_reference.py computes, which src/quant/nvfp4.h must match byte for byte
(tests/quant/test_nvfp4.cpp). tests/python/test_nvfp4_reference.py writes it again and compares,
so the committed file stays what the oracle says.

For each case (a float32 weight) and rule (six: NVIDIA's NVFP4; fos: Four Over Six) the file holds
  <case>.input              f32 [rows, cols]
  <case>.<rule>.packed      u8  [rows, ceil(cols/2)]   E2M1 codes, the even column in the low nibble
  <case>.<rule>.scales      u8  [rows, ceil(cols/16)]  the E4M3 block scale codes
  <case>.<rule>.decode      f32 [1]                    the tensor scale
  <case>.<rule>.dequantized f32 [rows, cols]
plus e2m1.input f32 [n] (values on and between E2M1's grid points, ties, signed zeros, infinities,
NaN) and e2m1.codes u8 [n].

Usage: python3 scripts/make_nvfp4_fixtures.py OUT_DIR
"""
import os
import sys

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import nvfp4_reference  # noqa: E402

CASES = [  # name, rows, cols
    ("wide", 24, 128),
    ("ragged", 7, 40),   # a last block of 8 per row
    ("odd", 5, 33),      # an odd column count: each row's last byte padded
]


def weight(rows, cols, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    w[1, :16] = 0.0                        # a block of zeros
    w[2, :16] = 0.0
    w[2, 5] = -0.03125                     # a block of one value
    w[3, :16] = np.linspace(-1, 1, 16) * np.float32(0.05)  # evenly spread: 4/6 picks differ
    w[0, 0] = 0.125                        # the tensor's largest value
    return w


def e2m1_probes():
    grid = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)
    mids = (grid[:-1] + grid[1:]) / 2
    values = [grid, mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(10)),
              np.array([0.25, 0.2499999, 0.2500001, 5.999, 6.0001, 7.0, 1e30, np.inf, 1e-40], np.float32),
              np.linspace(0, 7, 141, dtype=np.float32)]
    positive = np.concatenate(values).astype(np.float32)
    return np.concatenate([positive, -positive, np.array([np.nan, -np.nan], np.float32)]).astype(np.float32)


def tensors():
    out = {}
    for index, (name, rows, cols) in enumerate(CASES):
        w = weight(rows, cols, 19 + index)
        out[f"{name}.input"] = w
        for rule, four_over_six in (("six", False), ("fos", True)):
            packed, scales, decode, dequantized = nvfp4_reference.quantize(w, four_over_six)
            out[f"{name}.{rule}.packed"] = packed
            out[f"{name}.{rule}.scales"] = scales
            out[f"{name}.{rule}.decode"] = np.array([decode], np.float32)
            out[f"{name}.{rule}.dequantized"] = dequantized
    probes = e2m1_probes()
    out["e2m1.input"] = probes
    out["e2m1.codes"] = nvfp4_reference.e2m1_codes(probes)
    return {key: np.ascontiguousarray(value) for key, value in out.items()}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "nvfp4_reference.safetensors")
    save_file(tensors(), path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
