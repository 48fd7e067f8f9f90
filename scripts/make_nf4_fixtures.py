#!/usr/bin/env python3
"""Writes tests/fixtures/nf4/bnb_nf4.safetensors: what bitsandbytes' quantize_4bit (NF4) computes,
the oracle that src/quant/nf4.h must match byte for byte.

For each case (a bf16 weight and a block size) the file holds
  <case>.input            bf16 [rows, cols]  the weight (normal, std 0.02, with one all-zero block
                                            and one block holding a single non-zero value)
  <case>.packed           u8   [numel / 2]   quantize_4bit(nf4, compress_statistics=False) on CUDA
  <case>.absmax           f32  [blocks]
  <case>.dq.packed        u8                 the same with compress_statistics=True (double quant)
  <case>.dq.absmax        u8   [blocks]      the absmax quantized with the 8-bit dynamic map
  <case>.dq.absmax2       f32  [blocks/256]  the second-level absmax (block 256)
  <case>.dq.offset        f32  [1]           the mean of the first-level absmax
  <case>.dequantized      bf16               dequantize_4bit of the double-quantized state
  <case>.cpu.packed, <case>.cpu.absmax       quantize_4bit on the CPU backend (torch ops)
plus dynamic_code f32 [256], bitsandbytes' create_dynamic_map(signed=True).

Run where torch and bitsandbytes are installed, on a GPU (the GPU machine, bitsandbytes carried
as a wheel):  python3 scripts/make_nf4_fixtures.py OUT_DIR
then copy OUT_DIR/bnb_nf4.safetensors into tests/fixtures/nf4/.
"""
import os
import sys

import torch
import bitsandbytes as bnb
import bitsandbytes.functional as F
from safetensors.torch import save_file

CASES = [  # name, rows, cols, block size
    ("b64", 128, 256, 64),
    ("b128", 96, 320, 128),
    ("b256", 64, 512, 256),
    ("b512", 32, 1024, 512),
    ("b64_tail", 7, 100, 64),  # 700 values: the last block holds 60
]


def weight(rows, cols, block, seed):
    generator = torch.Generator().manual_seed(seed)
    w = (torch.randn(rows, cols, generator=generator) * 0.02).to(torch.bfloat16)
    flat = w.view(-1)
    if flat.numel() >= 3 * block:
        flat[block:2 * block] = 0  # absmax 0: bitsandbytes' 1/0 path
        flat[2 * block:3 * block] = 0
        flat[2 * block + 5] = -0.03125  # one value: it is the block's absmax exactly
    return w


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    for index, (name, rows, cols, block) in enumerate(CASES):
        w = weight(rows, cols, block, 1234 + index)
        tensors[f"{name}.input"] = w
        packed, state = F.quantize_4bit(w.cuda(), blocksize=block, compress_statistics=False, quant_type="nf4")
        tensors[f"{name}.packed"] = packed.view(-1).cpu()
        tensors[f"{name}.absmax"] = state.absmax.float().cpu()
        packed_dq, state_dq = F.quantize_4bit(w.cuda(), blocksize=block, compress_statistics=True, quant_type="nf4")
        tensors[f"{name}.dq.packed"] = packed_dq.view(-1).cpu()
        tensors[f"{name}.dq.absmax"] = state_dq.absmax.view(-1).cpu()
        tensors[f"{name}.dq.absmax2"] = state_dq.state2.absmax.float().cpu()
        tensors[f"{name}.dq.offset"] = state_dq.offset.float().view(1).cpu()
        tensors[f"{name}.dequantized"] = F.dequantize_4bit(packed_dq, state_dq).view(rows, cols).cpu()
        cpu_packed, cpu_state = F.quantize_4bit(w, blocksize=block, compress_statistics=False, quant_type="nf4")
        tensors[f"{name}.cpu.packed"] = cpu_packed.view(-1)
        tensors[f"{name}.cpu.absmax"] = cpu_state.absmax.float()
        same = torch.equal(tensors[f"{name}.cpu.packed"], tensors[f"{name}.packed"])
        print(f"{name}: {rows}x{cols} block {block}: absmax blocks {state.absmax.numel()}, "
              f"cpu packed == cuda packed: {same}")
    tensors["dynamic_code"] = F.create_dynamic_map(signed=True).float()
    tensors = {key: value.contiguous() for key, value in tensors.items()}
    path = os.path.join(out_dir, "bnb_nf4.safetensors")
    save_file(tensors, path, metadata={"bitsandbytes": bnb.__version__, "torch": torch.__version__})
    print(f"wrote {path} ({os.path.getsize(path)} bytes) with bitsandbytes {bnb.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
