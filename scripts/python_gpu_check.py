#!/usr/bin/env python3
"""The Python package on a GPU machine (torch installed): bf16 weights held by the CUDA backend are
read by torch in place through DLPack, and a write through torch changes what the engine computes.

    python3 scripts/python_gpu_check.py MODEL_DIR     # with surogate (a CUDA build) and torch installed

Prints one line per check and exits non-zero on the first failure.
"""
import sys

import numpy as np
import torch

import surogate


def main(model_dir: str) -> int:
    if not surogate.has_cuda:
        print("FAIL: this surogate was built without CUDA")
        return 1
    model = surogate.load(model_dir, device="cuda", batch_size=2, seq_len=32)
    name = model.names()[-1]
    tensor = model.weight(name, "torch")
    checks = {
        "on the GPU": tensor.is_cuda,
        "bf16": tensor.dtype == torch.bfloat16,
        "no copy (same device pointer)": tensor.data_ptr() == model.data_pointer(name),
    }
    rows = [[1, 2, 3, 4, 5, 6, 7, 8], [3, 1, 4, 1, 5]]
    before = model.loss(rows)
    cpu = surogate.load(model_dir, batch_size=2, seq_len=32).loss(rows)
    checks[f"bf16 GPU loss {before:.5f} near the fp32 CPU loss {cpu:.5f} (2%)"] = abs(before - cpu) <= 0.02 * abs(cpu)
    saved = tensor.clone()
    tensor.zero_()  # torch writes the engine's weight on the GPU
    checks["a torch write changes the engine's loss"] = model.loss(rows) != before
    model.set_weight(name, saved)  # a GPU tensor of the model's dtype: copied on the GPU
    checks["set_weight from a GPU tensor restores it"] = model.loss(rows) == before
    host = model.weight(name)  # numpy: a float32 host copy
    checks["numpy copy equals the tensor"] = np.array_equal(host, saved.float().cpu().numpy())
    failed = False
    for label, ok in checks.items():
        print(("ok   " if ok else "FAIL ") + label)
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
