"""Measures the GPU's matmul ceilings (the MFU denominators) with PyTorch's cuBLAS path: the
median of timed 8192^3 products on random data after warm-up, in bf16 and, on SM89+, in FP8
(E4M3 x E4M3 -> bf16 through torch._scaled_mm, with and without fast accumulation: fp8_hybrid's
forward products use it, its backward products do not)."""
import json

import torch


def median_seconds(product):
    for _ in range(5):
        product()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        product()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    n = 8192
    flops = 2 * n**3
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    result = {"gpu": torch.cuda.get_device_name(), "bf16_matmul_tflops": round(flops / median_seconds(lambda: a @ b) / 1e12, 1)}
    if torch.cuda.get_device_capability() >= (8, 9):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t()  # _scaled_mm takes its second operand column-major
        one = torch.tensor(1.0, device="cuda")
        for key, fast in (("fp8_matmul_tflops", False), ("fp8_matmul_tflops_fast_accum", True)):
            seconds = median_seconds(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                              use_fast_accum=fast))
            result[key] = round(flops / seconds / 1e12, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
