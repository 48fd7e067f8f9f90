// Qwen3's per-head q/k RMSNorm fused with RoPE: one pass over q (or k) instead of two.
//   forward:  n = x · rstd · w  (rstd over the head's head_dim channels, w shared by all heads)
//             y = rope(n)       (HF rotate_half, full rotary: rotary_dim == head_dim; rope.h)
//   backward: dn = ropeᵀ(dy);   dx = rstd · (g − x̂ · mean(g · x̂)),  g = dn · w,  x̂ = x · rstd
//             dw += Σ_rows dn · x̂                                              (fp32)
// Layout [tokens, heads, head_dim] bf16; rstd fp32 [tokens · heads] is saved by the forward;
// the backward takes the forward's input x. head_dim must be a multiple of 16 (≤ 256).
// Work layout: head_dim / 16 lanes per (token, head) row; each lane holds one 8-wide vector
// of the first half and its rotation partner in the second half, so norm, rotation and store
// happen in registers; the row's sum of squares is a shuffle reduction inside the lane group.
// The backward runs a fixed grid (at most 256 blocks); each block reduces its lanes' dw in
// shared memory in a fixed order and writes one partial row; a second kernel sums the partials
// into dweight in a fixed order: deterministic. A null dweight (frozen weight) skips both. In
// place is allowed (out == in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/fp8_quantize.h"

namespace surogate::cuda {

// The head sizes the fused kernels take (head_dim / 16 lanes a row: a power of two ≤ 16).
inline bool qk_norm_rope_takes(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

struct QkNormRopeShape {
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  float epsilon = 1e-6f;
  float scaling = 1.0f;  // HF attention_scaling applied to cos / sin
};

template <typename T>
void qk_norm_rope_forward(T* out, float* rstd, const T* input, const T* weight,
                          const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                          cudaStream_t stream);

// One tensor of a pair launch: its input, weight [head_dim] and outputs.
template <typename T>
struct QkNormRopeTensor {
  T* out = nullptr;
  float* rstd = nullptr;
  const T* input = nullptr;
  const T* weight = nullptr;
};

// The forward of q and k of one layer in ONE launch (a decode step's two tiny launches made one:
// generate/decode_fusion.h): q's blocks then k's, each as qk_norm_rope_forward computes it (the same
// bits). q_shape is q's; k has k_heads heads and the same tokens, head_dim, epsilon and scaling.
template <typename T>
void qk_norm_rope_forward_pair(const QkNormRopeTensor<T>& q, const QkNormRopeTensor<T>& k, const float* inv_freq,
                               const int32_t* position_ids, const QkNormRopeShape& q_shape, int k_heads,
                               cudaStream_t stream);

int64_t qk_norm_rope_backward_scratch_floats(const QkNormRopeShape& shape);

template <typename T>
void qk_norm_rope_backward(T* dinput, float* dweight, float* scratch, const T* dout,
                           const T* input, const T* weight, const float* rstd,
                           const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                           cudaStream_t stream);

// The backward in bf16, also writing the codes of dinput in fp8_out.format (the fp8_hybrid recipe's
// gradient for the q / k projection; fp8_quantize.h's Fp8Output): bit for bit the backward then
// fp8_record_amax + fp8_quantize of dinput. `dinput` may be null when nothing reads the bf16
// gradient (full fine-tuning) and fp8_out.delayed_known.
void qk_norm_rope_backward_fp8(__nv_bfloat16* dinput, float* dweight, float* scratch, const __nv_bfloat16* dout,
                               const __nv_bfloat16* input, const __nv_bfloat16* weight, const float* rstd,
                               const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                               const Fp8Output& fp8_out, cudaStream_t stream);

}  // namespace surogate::cuda
