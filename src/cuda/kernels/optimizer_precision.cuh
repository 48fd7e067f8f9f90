// Device helpers the optimizer kernels share for the two precision options:
//   gradient_dtype: the accumulated gradients they read are fp32 or bf16 (read as fp32);
//   master_dtype bf16: no fp32 master; the bf16 weight is read, updated in fp32 and written
//                     back with stochastic rounding (core/stochastic_rounding.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "core/stochastic_rounding.h"

namespace surogate::cuda::kernels {

__device__ __forceinline__ float load_gradient(const float* gradient, int64_t index) { return gradient[index]; }
__device__ __forceinline__ float load_gradient(const __nv_bfloat16* gradient, int64_t index) {
  return __bfloat162float(gradient[index]);
}

// Elements 4·index .. 4·index + 3 (16-byte fp32 or 8-byte bf16 loads; the pointer is aligned).
__device__ __forceinline__ float4 load4(const float* values, int64_t index) {
  return reinterpret_cast<const float4*>(values)[index];
}
__device__ __forceinline__ float4 load4(const __nv_bfloat16* values, int64_t index) {
  const uint2 packed = reinterpret_cast<const uint2*>(values)[index];
  const float2 low = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.x));
  const float2 high = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.y));
  return make_float4(low.x, low.y, high.x, high.y);
}

__device__ __forceinline__ __nv_bfloat16 stochastic_bf16(float value, uint64_t parameter_key, int64_t element) {
  return __ushort_as_bfloat16(
      stochastic_round_bf16(value, rounding_bits(parameter_key, static_cast<uint64_t>(element))));
}

}  // namespace surogate::cuda::kernels
