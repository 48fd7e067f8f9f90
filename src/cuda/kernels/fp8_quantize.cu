// FP8 quantization kernels; see fp8_quantize.h.
#include "cuda/kernels/fp8_quantize.h"

#include <cuda_fp8.h>

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/fp8_epilogue.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

using fp8::amax_bits;
using fp8::record_block_max;
using fp8::scale_for;

__device__ __forceinline__ bool vectorised(const void* x, const void* q, int64_t n) {
  return n % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0;
}

__global__ void record_amax(const __nv_bfloat16* x, int64_t n, const float* row, float* amax) {
  if (row != nullptr && row[0] > 0.0f) return;  // delayed scaling: the tensor's own amax is not used
  unsigned bits = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (vectorised(x, x, n)) {
    for (int64_t i = first; i < n / 8; i += stride) {
      const uint4 packed = reinterpret_cast<const uint4*>(x)[i];
      const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&packed);
      for (int j = 0; j < 8; ++j) bits = max(bits, amax_bits(__bfloat162float(values[j])));
    }
  } else {
    for (int64_t i = first; i < n; i += stride) bits = max(bits, amax_bits(__bfloat162float(x[i])));
  }
  record_block_max(bits, amax);
}

// only_pending: fp8_quantize_pending (nothing to do when the producer quantized: row[0] > 0).
template <__nv_fp8_interpretation_t kFormat>
__global__ void quantize(const __nv_bfloat16* x, int64_t n, float format_max, float* row, const float* amax, uint8_t* q,
                         float* scale_inv, bool only_pending) {
  const float delayed = row[0];
  if (only_pending && delayed > 0.0f) return;
  const float scale = scale_for(delayed > 0.0f ? delayed : *amax, format_max);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.0f, scale);
  unsigned bits = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (vectorised(x, q, n)) {
    for (int64_t i = first; i < n / 8; i += stride) {
      const uint4 packed = reinterpret_cast<const uint4*>(x)[i];
      const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&packed);
      uint2 out;
      auto* pairs = reinterpret_cast<__nv_fp8x2_storage_t*>(&out);
      for (int j = 0; j < 4; ++j) {
        const float a = __bfloat162float(values[2 * j]), b = __bfloat162float(values[2 * j + 1]);
        bits = max(bits, max(amax_bits(a), amax_bits(b)));
        pairs[j] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(a, scale), __fmul_rn(b, scale)), __NV_SATFINITE, kFormat);
      }
      reinterpret_cast<uint2*>(q)[i] = out;
    }
  } else {
    for (int64_t i = first; i < n; i += stride) {
      const float value = __bfloat162float(x[i]);
      bits = max(bits, amax_bits(value));
      q[i] = __nv_cvt_float_to_fp8(__fmul_rn(value, scale), __NV_SATFINITE, kFormat);
    }
  }
  record_block_max(bits, row + 1);
}

__global__ void roll(float* state, int64_t history, int64_t step, float headroom) {
  float* row = state + int64_t{blockIdx.x} * (history + 2);
  float* slots = row + 2;
  __shared__ float current;
  if (threadIdx.x == 0) {
    current = row[1] * headroom;
    slots[step % history] = current;
  }
  __syncthreads();
  unsigned bits = 0;
  for (int64_t i = threadIdx.x; i < history; i += blockDim.x) {
    const float value = i == step % history ? current : slots[i];
    bits = max(bits, __float_as_uint(value));
  }
  for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
  __shared__ unsigned warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = bits;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) bits = max(bits, warp_max[w]);
    bits = max(bits, warp_max[0]);
    row[0] = __uint_as_float(bits);
    row[1] = 0.0f;
  }
}

int blocks_for(int64_t work) {
  return static_cast<int>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 132 * 16));
}

}  // namespace

void fp8_record_amax(const __nv_bfloat16* x, int64_t n, const float* row, float* amax, cudaStream_t stream) {
  if (n == 0) return;
  record_amax<<<blocks_for(n % 8 == 0 ? n / 8 : n), kThreads, 0, stream>>>(x, n, row, amax);
  CUDA_CHECK(cudaGetLastError());
}

void fp8_quantize(const __nv_bfloat16* x, int64_t n, Fp8Target format, float* row, const float* amax, uint8_t* q,
                  float* scale_inv, cudaStream_t stream) {
  const int blocks = blocks_for(n % 8 == 0 ? n / 8 : n);
  if (format == Fp8Target::E4M3) {
    quantize<__NV_E4M3><<<blocks, kThreads, 0, stream>>>(x, n, 448.0f, row, amax, q, scale_inv, false);
  } else {
    quantize<__NV_E5M2><<<blocks, kThreads, 0, stream>>>(x, n, 57344.0f, row, amax, q, scale_inv, false);
  }
  CUDA_CHECK(cudaGetLastError());
}

void fp8_quantize_pending(const __nv_bfloat16* x, int64_t n, const Fp8Output& site, cudaStream_t stream) {
  if (n == 0 || site.delayed_known) return;
  // Once a site has a delayed amax every block returns at once: a 2,112-block grid of such blocks
  // cost 3.4 µs per producer on an H200 (~8 per layer and micro-batch). 264 blocks of 256 threads
  // still keep enough loads in flight for the first step, when the kernel does the quantizing.
  const int blocks = std::min(blocks_for(n % 8 == 0 ? n / 8 : n), 132 * 2);
  if (site.format == Fp8Target::E4M3) {
    quantize<__NV_E4M3><<<blocks, kThreads, 0, stream>>>(x, n, 448.0f, site.row, site.amax, site.q, site.scale_inv, true);
  } else {
    quantize<__NV_E5M2><<<blocks, kThreads, 0, stream>>>(x, n, 57344.0f, site.row, site.amax, site.q, site.scale_inv, true);
  }
  CUDA_CHECK(cudaGetLastError());
}

void fp8_roll_history(float* state, int64_t sites, int64_t history, int64_t step, cudaStream_t stream,
                      float headroom) {
  if (sites == 0) return;
  roll<<<static_cast<unsigned>(sites), kThreads, 0, stream>>>(state, history, step, headroom);
  CUDA_CHECK(cudaGetLastError());
}

void fp8_drop_current_amaxes(float* state, int64_t sites, int64_t history, cudaStream_t stream) {
  if (sites == 0) return;
  const size_t row_bytes = static_cast<size_t>(history + 2) * sizeof(float);  // rows as roll's: 2 floats, then the history
  CUDA_CHECK(cudaMemset2DAsync(state + 1, row_bytes, 0, sizeof(float), static_cast<size_t>(sites), stream));
}

}  // namespace surogate::cuda
