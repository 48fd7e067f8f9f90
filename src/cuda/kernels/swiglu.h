// SwiGLU, the gated MLP activation of Llama / Qwen / Mistral:
//   forward:  out = silu(gate) · up,               silu(g) = g · σ(g)
//   backward: dgate = dout · up · σ(g)·(1 + g·(1 − σ(g))),   dup = dout · silu(g)
// out / dout are bf16 [rows, I]. gate and up are bf16 rows of I channels read with a row stride
// (`input_stride` elements), so both a fused gate_up projection [rows, 2I] (gate = base,
// up = base + I, stride 2I) and two separate [rows, I] tensors (stride I) work; dgate / dup are
// written with the same stride. Elementwise in fp32, one 8-wide vector per thread where I and the
// stride are multiples of 8, else one value per thread (the same values). The fp8 forms take
// multiples of 8 only. Nothing is saved beyond the inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/fp8_quantize.h"

namespace surogate::cuda {

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t rows,
                    int64_t channels, int64_t input_stride, cudaStream_t stream);

// The forward in bf16, also writing the E4M3 codes of `out` for the fp8_hybrid recipe
// (fp8_quantize.h's Fp8Output: bit for bit the forward then fp8_record_amax + fp8_quantize of `out`).
// `out` may be null when nothing reads it and fp8_out.delayed_known (full fine-tuning's down_proj
// reads the codes only).
void swiglu_forward_fp8(__nv_bfloat16* out, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        int64_t channels, int64_t input_stride, const Fp8Output& fp8_out, cudaStream_t stream);

// The backward in bf16 (rows of `channels`, stride = channels), also writing the codes of d_gate
// and of d_up, each at its own site, both in gate_out.format (the fp8_hybrid recipe's gradient
// format): bit for bit the backward then fp8_record_amax + fp8_quantize of each gradient. Either
// bf16 gradient may be null when nothing reads it and its site's delayed_known (full fine-tuning's
// gate and up read the codes only; LoRA's adapters read the bf16).
void swiglu_backward_fp8(__nv_bfloat16* dgate, __nv_bfloat16* dup, const __nv_bfloat16* dout, const __nv_bfloat16* gate,
                         const __nv_bfloat16* up, int64_t rows, int64_t channels, const Fp8Output& gate_out,
                         const Fp8Output& up_out, cudaStream_t stream);

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout,
                     const T* gate, const T* up, int64_t rows, int64_t channels,
                     int64_t input_stride, cudaStream_t stream);

}  // namespace surogate::cuda
