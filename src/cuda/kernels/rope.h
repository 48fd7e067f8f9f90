// Rotary position embedding, Hugging Face "rotate_half" convention, applied to q or k laid out
// [tokens, heads, head_dim] (bf16, row-major). For i < R/2, R = rotary_dim (≤ head_dim):
//   θ = position_ids[t] · inv_freq[i],  c = cos θ · scaling,  s = sin θ · scaling
//   forward:  y[i] = x[i]·c − x[i+R/2]·s,     y[i+R/2] = x[i+R/2]·c + x[i]·s
//   backward: dx[i] = dy[i]·c + dy[i+R/2]·s,  dx[i+R/2] = dy[i+R/2]·c − dy[i]·s   (the transpose)
// Channels from R to head_dim pass through unchanged. inv_freq (fp32 [R/2]) comes from the
// model's RopeParameters (default, linear, llama3, yarn ... are all a different inv_freq and
// `scaling`, HF's attention_scaling); position ids restart per packed document, so the kernel
// never derives positions itself. cos/sin are computed in fp32 in the kernel (nothing saved:
// recomputing is cheaper than reading a table). Each thread rotates one 8-wide vector of the
// first half together with its partner vector of the second half; R must be a multiple of 16.
// In place is allowed (out == in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename T>
void rope_forward(T* out, const T* in, const float* inv_freq, const int32_t* position_ids,
                  int64_t tokens, int heads, int head_dim, int rotary_dim, float scaling, cudaStream_t stream);

template <typename T>
void rope_backward(T* dinput, const T* dout, const float* inv_freq,
                   const int32_t* position_ids, int64_t tokens, int heads, int head_dim, int rotary_dim,
                   float scaling, cudaStream_t stream);

}  // namespace surogate::cuda
