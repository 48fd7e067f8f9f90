// FP8 block dequantization kernels; see dequantize_fp8_blocks.h.
#include "cuda/kernels/dequantize_fp8_blocks.h"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/fp4_fp8_values.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float block_scale(const Fp8BlockDeviceView& view, int64_t row, int64_t col) {
  const int64_t col_blocks = (view.cols + view.block - 1) / view.block;
  return view.scale_inv[(row / view.block) * col_blocks + col / view.block];
}

__global__ void dequantize_vector8(Fp8BlockDeviceView view, __nv_bfloat16* out) {
  const int64_t groups = view.rows * view.cols / 8;
  for (int64_t group = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; group < groups;
       group += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = group * 8;
    const float scale = block_scale(view, first / view.cols, first % view.cols);
    const uint2 codes = reinterpret_cast<const uint2*>(view.codes)[group];
    __align__(16) __nv_bfloat16 values[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = i < 4 ? codes.x : codes.y;
      const auto code = static_cast<uint8_t>((word >> (8 * (i % 4))) & 0xFF);
      values[i] = __float2bfloat16_rn(__fmul_rn(e4m3_value(code), scale));
    }
    reinterpret_cast<uint4*>(out)[group] = *reinterpret_cast<const uint4*>(values);
  }
}

__global__ void dequantize_scalar(Fp8BlockDeviceView view, __nv_bfloat16* out) {
  const int64_t numel = view.rows * view.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < numel; i += int64_t{gridDim.x} * blockDim.x) {
    const float scale = block_scale(view, i / view.cols, i % view.cols);
    out[i] = __float2bfloat16_rn(__fmul_rn(e4m3_value(view.codes[i]), scale));
  }
}

}  // namespace

void dequantize_fp8_blocks_bf16(const Fp8BlockDeviceView& view, __nv_bfloat16* out, cudaStream_t stream) {
  const int64_t numel = view.rows * view.cols;
  const bool vectorised = view.cols % 8 == 0 && view.block % 8 == 0 &&
                          reinterpret_cast<uintptr_t>(view.codes) % 8 == 0 &&
                          reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t work = vectorised ? numel / 8 : numel;
  if (work == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16));
  if (vectorised) {
    dequantize_vector8<<<blocks, kThreads, 0, stream>>>(view, out);
  } else {
    dequantize_scalar<<<blocks, kThreads, 0, stream>>>(view, out);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
