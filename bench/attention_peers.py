"""PyTorch's fused attention backends (cuDNN, FlashAttention-2, memory-efficient) at the LoRA
job's attention shapes, to compare with `cuda_measure`'s rows for our kernels (docs/cuda.md).

    python3 bench/attention_peers.py [build/attention_bench]   # on the GPU machine; one JSON line a row

With the path of our attention_bench binary (bench/attention_bench.cpp) it also prints, in the
same call, our two CUDA paths at the same shapes: cuDNN's fused SDPA through the frontend (plain
and deterministic backward; "rows": one sequence per batch row as SDPA is given, "documents": the
decoder's document ids, cuDNN's ragged layout) and our flash kernels.

Causal, bf16, [batch, heads, seq, head_dim] inputs, GQA expanded to the q heads (what SDPA's
cuDNN and flash paths take). FLOPs: forward 4·B·Hq·S²·D / 2 (causal), backward 2.5× that.
Each figure is the median of 20 timed calls after 5 warm-ups, with CUDA events.
"""
import json
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [("2x2048, 32/8 (8B job)", 2, 2048, 32, 8), ("2x2048, 16/8 (0.6B job)", 2, 2048, 16, 8),
          ("8x2048, 32/8", 8, 2048, 32, 8)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash2": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def median_ms(fn, warmup=5, repeat=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    torch.manual_seed(0)
    for name, batch, seq, q_heads, kv_heads in SHAPES:
        dim = 128
        q = torch.randn(batch, q_heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(batch, kv_heads, seq, dim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(batch, kv_heads, seq, dim, device="cuda", dtype=torch.bfloat16)
        k = k.repeat_interleave(q_heads // kv_heads, dim=1).detach().requires_grad_()
        v = v.repeat_interleave(q_heads // kv_heads, dim=1).detach().requires_grad_()
        grad = torch.randn(batch, q_heads, seq, dim, device="cuda", dtype=torch.bfloat16)
        fwd_flops = 4 * batch * q_heads * seq * seq * dim / 2
        for backend_name, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                    both = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad))
            except RuntimeError as error:
                print(json.dumps({"shape": name, "backend": backend_name, "error": str(error).splitlines()[0]}))
                continue
            bwd = max(both - fwd, 1e-6)
            print(json.dumps({"shape": name, "backend": backend_name, "fwd_ms": round(fwd, 3), "bwd_ms": round(bwd, 3),
                              "fwd_tflops": round(fwd_flops / fwd / 1e9, 1),
                              "bwd_tflops": round(2.5 * fwd_flops / bwd / 1e9, 1),
                              "cudnn": torch.backends.cudnn.version(), "torch": torch.__version__,
                              "gpu": torch.cuda.get_device_name()}))
            del out
    if len(sys.argv) > 1:  # ours, same GPU, same call
        gpu = torch.cuda.get_device_name()
        torch.cuda.empty_cache()
        result = subprocess.run([sys.argv[1]], capture_output=True, text=True, check=False)
        for line in result.stdout.splitlines():
            row = json.loads(line)
            row["gpu"] = gpu
            print(json.dumps(row))
        if result.returncode != 0:
            print(json.dumps({"backend": "surogate", "error": result.stderr.strip().splitlines()[-1:]}))


if __name__ == "__main__":
    main()
