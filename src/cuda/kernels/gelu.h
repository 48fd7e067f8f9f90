// GELU on 16-bit tensors (ops/gelu.h has the formulas and the CPU reference):
//   erf form:   y = ½ x (1 + erf(x/√2))          (transformers' "gelu")
//   tanh form:  y = ½ x (1 + tanh(√(2/π)(x + 0.044715 x³)))   ("gelu_pytorch_tanh", "gelu_new")
//   quick form: y = x · σ(1.702 x)                  ("quick_gelu": CLIP's, Qwen2-VL's vision MLP)
// Elementwise in fp32 (erff / tanhf / expf, not the fast intrinsics), any count, one rounding of
// the result to T. dx may alias dout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

enum class GeluForm { Erf, Tanh, Quick };

template <typename T>
void gelu_forward(T* out, const T* x, int64_t count, GeluForm form, cudaStream_t stream);

template <typename T>
void gelu_backward(T* dx, const T* dout, const T* x, int64_t count, GeluForm form, cudaStream_t stream);

}  // namespace surogate::cuda
