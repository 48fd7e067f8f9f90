// NVFP4 dequantization on the GPU (quant/nvfp4.h is the format and the CPU reference): a frozen
// qlora_fp4 weight [rows, cols] rebuilt in bf16 right before the matmul that reads it (Hopper has no
// FP4 tensor cores: the saving is memory). value = (e2m1(code) · e4m3(block scale)) · tensor scale
// in fp32 (two multiplies, the first exact, no fused operation), rounded to nearest bf16:
// bit-identical to the CPU reference rounded to bf16 (tests/runtime_cuda/test_nvfp4_cuda.cpp).
// Vectorised: one thread turns one block (8 packed bytes, one scale) into 16 values (two 16-byte
// stores) when cols is a multiple of 16 and the pointers aligned; otherwise one value per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

struct Nvfp4DeviceView {
  const uint8_t* packed = nullptr;        // [rows, ceil(cols / 2)], the even column in the low nibble
  const uint8_t* block_scales = nullptr;  // E4M3 [rows, ceil(cols / 16)]
  const float* tensor_scale = nullptr;    // device scalar: the decode scale
  int64_t rows = 0;
  int64_t cols = 0;
};

void dequantize_fp4_bf16(const Nvfp4DeviceView& view, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace surogate::cuda
