// NVFP4 quantization kernels; see quantize_nvfp4.h.
#include "cuda/kernels/quantize_nvfp4.h"

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>

#include "cuda/cuda_check.h"
#include "cuda/kernels/fp4_fp8_values.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlock = 16;  // values per E4M3 scale

__global__ void amax_kernel(const __nv_bfloat16* x, int64_t n, float* amax) {
  float largest = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    largest = fmaxf(largest, fabsf(__bfloat162float(x[i])));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    largest = fmaxf(largest, __shfl_xor_sync(0xFFFFFFFFu, largest, offset));
  }
  // Non-negative floats order as their bit patterns.
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(largest));
}

struct TensorScale {
  float encode;
  float decode;
};

__device__ TensorScale tensor_scale(float amax, bool four_over_six) {
  const float largest = four_over_six ? 6.0f * 256.0f : 6.0f * 448.0f;
  float encode = 1.0f;
  if (amax > 0.0f && isfinite(amax)) encode = fminf(__fdiv_rn(largest, amax), FLT_MAX);
  return {encode, __fdiv_rn(1.0f, encode)};
}

// One block quantized with the limit L: its scale code and value, and its 8 packed bytes.
struct Candidate {
  uint8_t scale;
  float scale_value;
  uint8_t bytes[kBlock / 2];
};

__device__ Candidate candidate(const float* x, int count, float encode, float scaled_bmax, float limit) {
  Candidate c;
  c.scale = static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(scaled_bmax, limit), __NV_SATFINITE, __NV_E4M3));
  c.scale_value = e4m3_value(c.scale);
  const float factor = c.scale_value > 0.0f ? __fdiv_rn(encode, c.scale_value) : 0.0f;
#pragma unroll
  for (int pair = 0; pair < kBlock / 2; ++pair) {
    const int i = 2 * pair;
    // Past the row's end, and in a block whose scale is 0, the code is +0.
    const float low = (i < count && c.scale_value > 0.0f) ? __fmul_rn(x[i], factor) : 0.0f;
    const float high = (i + 1 < count && c.scale_value > 0.0f) ? __fmul_rn(x[i + 1], factor) : 0.0f;
    c.bytes[pair] = static_cast<uint8_t>(__nv_cvt_float2_to_fp4x2(make_float2(low, high), __NV_E2M1, cudaRoundNearest));
  }
  return c;
}

__device__ float squared_error(const Candidate& c, const float* x, int count, float decode) {
  float error = 0.0f;
  for (int i = 0; i < count; ++i) {
    const uint32_t code = (i % 2 == 0) ? c.bytes[i / 2] & 0x0F : c.bytes[i / 2] >> 4;
    const float value = __fmul_rn(__fmul_rn(e2m1_value(code), c.scale_value), decode);
    const float difference = __fsub_rn(value, x[i]);
    error = __fadd_rn(error, __fmul_rn(difference, difference));
  }
  return error;
}

__global__ void quantize_kernel(const __nv_bfloat16* x, int64_t rows, int64_t cols, bool four_over_six,
                                const float* amax, uint8_t* packed, uint8_t* block_scales, float* decode_out) {
  const TensorScale scale = tensor_scale(*amax, four_over_six);
  if (blockIdx.x == 0 && threadIdx.x == 0) *decode_out = scale.decode;
  const int64_t scale_cols = (cols + kBlock - 1) / kBlock, packed_cols = (cols + 1) / 2;
  const int64_t blocks = rows * scale_cols;
  for (int64_t block = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; block < blocks;
       block += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = block / scale_cols, first = (block % scale_cols) * kBlock;
    const int count = static_cast<int>(cols - first < kBlock ? cols - first : kBlock);
    float values[kBlock];
    float bmax = 0.0f;
    for (int i = 0; i < kBlock; ++i) {
      values[i] = i < count ? __bfloat162float(x[row * cols + first + i]) : 0.0f;
      bmax = fmaxf(bmax, fabsf(values[i]));
    }
    const float scaled_bmax = __fmul_rn(bmax, scale.encode);
    Candidate chosen = candidate(values, count, scale.encode, scaled_bmax, 6.0f);
    if (four_over_six) {
      const Candidate four = candidate(values, count, scale.encode, scaled_bmax, 4.0f);
      if (squared_error(four, values, count, scale.decode) < squared_error(chosen, values, count, scale.decode)) {
        chosen = four;
      }
    }
    block_scales[block] = chosen.scale;
    uint8_t* target = packed + row * packed_cols + first / 2;
    for (int pair = 0; pair < (count + 1) / 2; ++pair) target[pair] = chosen.bytes[pair];
  }
}

int grid_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16)));
}

}  // namespace

void nvfp4_amax(const __nv_bfloat16* x, int64_t n, float* amax, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (n == 0) return;
  amax_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, amax);
  CUDA_CHECK(cudaGetLastError());
}

void quantize_nvfp4(const __nv_bfloat16* x, int64_t rows, int64_t cols, bool four_over_six, const float* amax,
                    uint8_t* packed, uint8_t* block_scales, float* decode, cudaStream_t stream) {
  const int64_t blocks = rows * ((cols + kBlock - 1) / kBlock);
  quantize_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(x, rows, cols, four_over_six, amax, packed,
                                                             block_scales, decode);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace surogate::cuda
