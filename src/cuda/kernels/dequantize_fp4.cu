// NVFP4 dequantization kernels; see dequantize_fp4.h.
#include "cuda/kernels/dequantize_fp4.h"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/fp4_fp8_values.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlock = 16;  // values per E4M3 scale

__device__ __nv_bfloat16 value(uint32_t code, float scale, float decode) {
  return __float2bfloat16_rn(__fmul_rn(__fmul_rn(e2m1_value(code), scale), decode));
}

// cols % 16 == 0: block b of the tensor is row b / (cols / 16), its 8 packed bytes contiguous.
__global__ void dequantize_block16(Nvfp4DeviceView view, __nv_bfloat16* out) {
  const float decode = *view.tensor_scale;
  const int64_t blocks = view.rows * view.cols / kBlock;
  for (int64_t block = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; block < blocks;
       block += int64_t{gridDim.x} * blockDim.x) {
    const float scale = e4m3_value(view.block_scales[block]);
    const uint2 bytes = reinterpret_cast<const uint2*>(view.packed)[block];
    __align__(16) __nv_bfloat16 values[kBlock];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t byte = ((i < 4 ? bytes.x : bytes.y) >> (8 * (i % 4))) & 0xFF;
      values[2 * i] = value(byte & 0x0F, scale, decode);
      values[2 * i + 1] = value(byte >> 4, scale, decode);
    }
    uint4* target = reinterpret_cast<uint4*>(out) + 2 * block;
    target[0] = reinterpret_cast<const uint4*>(values)[0];
    target[1] = reinterpret_cast<const uint4*>(values)[1];
  }
}

__global__ void dequantize_scalar(Nvfp4DeviceView view, __nv_bfloat16* out) {
  const float decode = *view.tensor_scale;
  const int64_t packed_cols = (view.cols + 1) / 2, scale_cols = (view.cols + kBlock - 1) / kBlock;
  const int64_t numel = view.rows * view.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < numel; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / view.cols, column = i % view.cols;
    const uint8_t byte = view.packed[row * packed_cols + column / 2];
    const float scale = e4m3_value(view.block_scales[row * scale_cols + column / kBlock]);
    out[i] = value(column % 2 == 0 ? byte & 0x0F : byte >> 4, scale, decode);
  }
}

}  // namespace

void dequantize_fp4_bf16(const Nvfp4DeviceView& view, __nv_bfloat16* out, cudaStream_t stream) {
  const int64_t numel = view.rows * view.cols;
  const bool vectorised = view.cols % kBlock == 0 && reinterpret_cast<uintptr_t>(view.packed) % 8 == 0 &&
                          reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t work = vectorised ? numel / kBlock : numel;
  if (work == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16));
  if (vectorised) {
    dequantize_block16<<<blocks, kThreads, 0, stream>>>(view, out);
  } else {
    dequantize_scalar<<<blocks, kThreads, 0, stream>>>(view, out);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
