// One (token, head) row of qk_norm_rope.h's forward — Qwen3's per-head RMSNorm, then RoPE (HF
// rotate_half, full rotary) — computed by the head_dim / 16 consecutive lanes that share the row:
// each lane holds one 8-wide vector of the first half and its rotation partner in the second half,
// so the norm, the rotation and the store happen in registers and the row's sum of squares is a
// shuffle inside the lane group. qk_norm_rope.cu's launches and the cached attention's split kernel
// (which normalises q and the new keys itself: cached_attention.h's CachedNormRope) both run this
// one function, so they write the same bits.
#pragma once

#include <cstdint>

#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda::norm_rope {

using kernels::kPackWidth;

// Sum over the `lanes` consecutive lanes (a power of two ≤ 32) that share one row.
__device__ __forceinline__ float group_sum(float value, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// cos / sin of this lane's 8 angles (sine negated for the backward).
__device__ __forceinline__ void rotation(float (&cosine)[kPackWidth], float (&sine)[kPackWidth], const float* inv_freq,
                                         int first, float position, float scaling, float sine_sign) {
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) {
    float s, c;
    sincosf(position * inv_freq[first + i], &s, &c);
    cosine[i] = c * scaling;
    sine[i] = s * scaling * sine_sign;
  }
}

// The forward of one row: `input` / `out` point at the row (head_dim elements), `position` at its
// position id, `rstd_out` at its rstd (or null). Every lane of the warp calls it (the shuffles);
// an inactive lane reads and writes nothing. kEarly (a decode step, all latency): every load at
// once — the row, the weight, the position, the frequencies — and the angles before the sum. Many
// rows (training) keep the weight and the angles after the sum, which measured faster there
// (16,384 × 32 heads: 0.110 against 0.116 ms).
template <typename T, bool kEarly>
__device__ __forceinline__ void row_forward(T* out, float* rstd_out, const T* input, const T* weight,
                                            const float* inv_freq, const int32_t* position, int head_dim,
                                            float epsilon, float scaling, int lane, bool active) {
  const int lanes = head_dim / 16, half = head_dim / 2;
  const int first = lane * kPackWidth;
  float low[kPackWidth] = {}, high[kPackWidth] = {};
  float w_low[kPackWidth] = {}, w_high[kPackWidth] = {}, cosine[kPackWidth] = {}, sine[kPackWidth] = {};
  const auto weight_and_angles = [&] {
    kernels::unpack(kernels::load_x8(weight + first), w_low);
    kernels::unpack(kernels::load_x8(weight + first + half), w_high);
    rotation(cosine, sine, inv_freq, first, static_cast<float>(*position), scaling, 1.0f);
  };
  if (active) {
    kernels::unpack(kernels::load_x8(input + first), low);
    kernels::unpack(kernels::load_x8(input + first + half), high);
    if constexpr (kEarly) weight_and_angles();
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) sum += low[i] * low[i] + high[i] * high[i];
  sum = group_sum(sum, lanes);
  if (!active) return;
  const float rstd = rsqrtf(sum / head_dim + epsilon);
  if (rstd_out != nullptr && lane == 0) *rstd_out = rstd;
  if constexpr (!kEarly) weight_and_angles();
  float y_low[kPackWidth], y_high[kPackWidth];
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) {
    const float n_low = low[i] * rstd * w_low[i], n_high = high[i] * rstd * w_high[i];
    y_low[i] = n_low * cosine[i] - n_high * sine[i];
    y_high[i] = n_high * cosine[i] + n_low * sine[i];
  }
  kernels::store_x8(out + first, kernels::pack<T>(y_low));
  kernels::store_x8(out + first + half, kernels::pack<T>(y_high));
}

}  // namespace surogate::cuda::norm_rope
