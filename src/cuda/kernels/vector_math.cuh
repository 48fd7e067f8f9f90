// Device helpers shared by the kernels: 16-byte vectors of 8 16-bit elements (every bf16 / fp16
// kernel moves data in these, so a warp issues 512-byte coalesced transactions), fp32
// conversions, and warp / block sum and max reductions with a fixed combination order
// (deterministic results). The 16-bit element type T is __nv_bfloat16 or __half
// (cuda/kernels/element_type.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda::kernels {

constexpr int kPackWidth = 8;  // 16-bit elements per 16-byte vector

template <typename T>
struct alignas(16) Vec8 {
  typename ElementTraits<T>::Pair pairs[4];
};
using Bf16x8 = Vec8<__nv_bfloat16>;

template <typename T>
__device__ __forceinline__ Vec8<T> load_x8(const T* address) {
  Vec8<T> value;
  *reinterpret_cast<uint4*>(&value) = *reinterpret_cast<const uint4*>(address);
  return value;
}

// Streaming load for data read once (no L1 allocation).
template <typename T>
__device__ __forceinline__ Vec8<T> load_x8_streaming(const T* address) {
  Vec8<T> value;
  *reinterpret_cast<uint4*>(&value) = __ldcs(reinterpret_cast<const uint4*>(address));
  return value;
}

template <typename T>
__device__ __forceinline__ void store_x8(T* address, const Vec8<T>& value) {
  *reinterpret_cast<uint4*>(address) = *reinterpret_cast<const uint4*>(&value);
}

template <typename T>
__device__ __forceinline__ void unpack(const Vec8<T>& packed, float (&out)[kPackWidth]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 pair = ElementTraits<T>::to_float2(packed.pairs[i]);
    out[2 * i] = pair.x;
    out[2 * i + 1] = pair.y;
  }
}

// Each value rounded to nearest even (fp16: past 65504 to ±inf, as the CPU's round_fp16).
template <typename T = __nv_bfloat16>
__device__ __forceinline__ Vec8<T> pack(const float (&in)[kPackWidth]) {
  Vec8<T> packed;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed.pairs[i] = ElementTraits<T>::from_floats(in[2 * i], in[2 * i + 1]);
  return packed;
}

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Sum over the block; every thread gets the result. `scratch` holds at least 32 floats.
// Ends with a barrier so the scratch can be reused right away.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_sum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : 0.0f;
  value = warp_sum(value);
  __syncthreads();
  return value;
}

__device__ __forceinline__ float block_max(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_max(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : -INFINITY;
  value = warp_max(value);
  __syncthreads();
  return value;
}

}  // namespace surogate::cuda::kernels
