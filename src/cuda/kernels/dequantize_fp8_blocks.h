// FP8 block dequantization on the GPU (quant/fp8_blocks.h is the format and the CPU reference): a
// frozen qlora_fp8 weight [rows, cols] rebuilt in bf16 right before the matmul that reads it.
// value = decode_e4m3(code) · scale_inv[row / block][col / block] in fp32 (one multiply, no fused
// operation), rounded to nearest bf16: bit-identical to the CPU reference rounded to bf16
// (tests/runtime_cuda/test_dequantize_fp8_blocks_cuda.cpp). E4M3 decodes exactly through half.
// Vectorised: one thread turns 8 codes into 8 values (one 8-byte load, one 16-byte store) when
// cols and the block are multiples of 8 and the pointers aligned; otherwise one value per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

struct Fp8BlockDeviceView {
  const uint8_t* codes = nullptr;     // E4M3 [rows, cols]
  const float* scale_inv = nullptr;   // [ceil(rows / block), ceil(cols / block)]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t block = 128;
};

void dequantize_fp8_blocks_bf16(const Fp8BlockDeviceView& view, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace surogate::cuda
