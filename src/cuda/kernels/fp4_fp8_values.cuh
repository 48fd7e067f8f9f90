// The values of E2M1 and E4M3 codes on the device, shared by the block-scaled kernels
// (dequantize_fp4.cu, quantize_nvfp4.cu, dequantize_fp8_blocks.cu). Both exact: every E2M1 and E4M3
// value is a float (and E4M3 converts exactly through half).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace surogate::cuda {

// E2M1 (quant::kE2m1Values): sign bit 3, exponent bits 2–1 (bias 1), mantissa bit 0; code 8 is −0.
__device__ inline float e2m1_value(uint32_t code) {
  const uint32_t exponent = (code >> 1) & 3, mantissa = code & 1;
  const float magnitude = exponent == 0 ? 0.5f * static_cast<float>(mantissa)
                                        : 0.5f * static_cast<float>((2 + mantissa) << (exponent - 1));
  return (code & 8) ? -magnitude : magnitude;
}

__device__ inline float e4m3_value(uint8_t code) {
  const __half_raw half = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(half));
}

}  // namespace surogate::cuda
