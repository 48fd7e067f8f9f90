"""Measures the GPU's bf16 matmul ceiling (the MFU denominator) with PyTorch's cuBLAS path:
the median of timed 8192^3 products on random data after warm-up."""
import json

import torch


def main():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "bf16_matmul_tflops": round(2 * n**3 / median / 1e12, 1)}))


if __name__ == "__main__":
    main()
