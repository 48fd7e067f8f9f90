// Device helpers shared by the kernels: 16-byte vectors of 8 bf16 (every bf16 kernel moves
// data in these, so a warp issues 512-byte coalesced transactions), fp32 conversions, and
// warp / block sum and max reductions with a fixed combination order (deterministic results).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace surogate::cuda::kernels {

constexpr int kPackWidth = 8;  // bf16 elements per 16-byte vector

struct alignas(16) Bf16x8 {
  __nv_bfloat162 pairs[4];
};

__device__ __forceinline__ Bf16x8 load_bf16x8(const __nv_bfloat16* address) {
  Bf16x8 value;
  *reinterpret_cast<uint4*>(&value) = *reinterpret_cast<const uint4*>(address);
  return value;
}

// Streaming load for data read once (no L1 allocation).
__device__ __forceinline__ Bf16x8 load_bf16x8_streaming(const __nv_bfloat16* address) {
  Bf16x8 value;
  *reinterpret_cast<uint4*>(&value) = __ldcs(reinterpret_cast<const uint4*>(address));
  return value;
}

__device__ __forceinline__ void store_bf16x8(__nv_bfloat16* address, const Bf16x8& value) {
  *reinterpret_cast<uint4*>(address) = *reinterpret_cast<const uint4*>(&value);
}

__device__ __forceinline__ void unpack(const Bf16x8& packed, float (&out)[kPackWidth]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 pair = __bfloat1622float2(packed.pairs[i]);
    out[2 * i] = pair.x;
    out[2 * i + 1] = pair.y;
  }
}

__device__ __forceinline__ Bf16x8 pack(const float (&in)[kPackWidth]) {
  Bf16x8 packed;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed.pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
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
