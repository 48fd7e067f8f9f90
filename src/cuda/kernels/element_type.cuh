// The 16-bit element types the kernels are templated on: __nv_bfloat16 (the bf16 recipe) and
// __half (torch_dtype: float16). ElementTraits<T> gives the pair type (two elements in 32 bits,
// the unit of the vector loads and of mma.sync fragments) and the fp32 conversions; every
// conversion to T rounds to nearest even, and fp16 overflows to ±inf past 65504 (65520 and up,
// as the CPU backend's round_fp16 does). Kernels compute in fp32 whatever T is.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace surogate::cuda::kernels {

template <typename T>
struct ElementTraits;

template <>
struct ElementTraits<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  __device__ static __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ static __forceinline__ float2 to_float2(Pair pair) { return __bfloat1622float2(pair); }
  __device__ static __forceinline__ Pair from_floats(float low, float high) { return __floats2bfloat162_rn(low, high); }
};

template <>
struct ElementTraits<__half> {
  using Pair = __half2;
  __device__ static __forceinline__ float to_float(__half x) { return __half2float(x); }
  __device__ static __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  __device__ static __forceinline__ float2 to_float2(Pair pair) { return __half22float2(pair); }
  __device__ static __forceinline__ Pair from_floats(float low, float high) { return __floats2half2_rn(low, high); }
};

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// fp32 → T, round to nearest even (identity for float).
template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return ElementTraits<T>::from_float(x);
  }
}

// Two fp32 values rounded into one 32-bit pair (the low one in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float low, float high) {
  typename ElementTraits<T>::Pair pair = ElementTraits<T>::from_floats(low, high);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// Stores two fp32 values rounded to T at an address aligned to a pair.
template <typename T>
__device__ __forceinline__ void store_pair(T* address, float low, float high) {
  *reinterpret_cast<typename ElementTraits<T>::Pair*>(address) = ElementTraits<T>::from_floats(low, high);
}

}  // namespace surogate::cuda::kernels

// Explicit instantiations of a launcher template for both 16-bit types: MACRO(__nv_bfloat16)
// MACRO(__half).
#define SUROGATE_FOR_16BIT_TYPES(MACRO) MACRO(__nv_bfloat16) MACRO(__half)
