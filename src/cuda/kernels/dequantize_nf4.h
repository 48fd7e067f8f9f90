// NF4 dequantization on the GPU (quant/nf4.h is the format and the CPU reference): a frozen QLoRA
// weight rebuilt in bf16 right before the matmul that reads it. value = level[code] · absmax in
// fp32 (no fused multiply-add, as bitsandbytes and the CPU reference), rounded to nearest bf16;
// with double quantization the block's absmax is dynamic_map[code] · absmax2[block / 256] +
// offset first (multiply, then add). Bit-identical to the CPU reference rounded to bf16
// (tests/runtime_cuda/test_cuda_dequantize_nf4.cpp).
// Vectorised: one thread turns 4 packed bytes into 8 values (one 16-byte store) when the count
// and block size are multiples of 8; otherwise one value per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

struct Nf4DeviceView {
  const uint8_t* packed = nullptr;
  const float* absmax = nullptr;          // plain
  const uint8_t* absmax_codes = nullptr;  // double quantization
  const float* absmax2 = nullptr;
  const float* offset = nullptr;          // device scalar
  int64_t numel = 0;
  int64_t block_size = 64;
};

// Copies the dynamic map into the current device's constant memory; once per device before the
// first dequantization (binders call it at load time: it synchronises, so not during a capture).
void prepare_dequantize_nf4();

void dequantize_nf4_bf16(const Nf4DeviceView& view, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace surogate::cuda
