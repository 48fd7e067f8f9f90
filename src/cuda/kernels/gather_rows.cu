// Row gathers between the shared and the expanded layout; see gather_rows.h.
#include "cuda/kernels/gather_rows.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/cuda_check.h"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

// One block per output row (grid-strided): the row's `units` units of U copied, or zeroed.
template <typename U>
__global__ void gather_rows_kernel(const U* __restrict__ x, const int32_t* __restrict__ index, int64_t rows,
                                   int64_t units, U* __restrict__ y) {
  for (int64_t m = blockIdx.x; m < rows; m += gridDim.x) {
    const int32_t from = index[m];
    U* out = y + m * units;
    if (from < 0) {
      for (int64_t u = threadIdx.x; u < units; u += blockDim.x) out[u] = U{};
    } else {
      const U* in = x + static_cast<int64_t>(from) * units;
      for (int64_t u = threadIdx.x; u < units; u += blockDim.x) out[u] = in[u];
    }
  }
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename E>
__device__ __forceinline__ E from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// One block per output row: Σ_k d_y[sources[n, k]] in fp32, VEC elements (16 bytes, or 1) a thread.
template <typename E, int VEC>
__global__ void gather_rows_sum_kernel(const E* __restrict__ d_y, const int32_t* __restrict__ sources, int64_t rows,
                                       int64_t fan_in, int64_t width, E* __restrict__ d_x) {
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    for (int64_t e = static_cast<int64_t>(threadIdx.x) * VEC; e < width; e += static_cast<int64_t>(blockDim.x) * VEC) {
      float sum[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) sum[v] = 0.0f;
      for (int64_t k = 0; k < fan_in; ++k) {
        const int32_t from = sources[n * fan_in + k];
        if (from < 0) continue;
        const E* in = d_y + static_cast<int64_t>(from) * width + e;
        if constexpr (VEC == 1) {
          sum[0] += to_float(in[0]);
        } else {
          const uint4 packed = *reinterpret_cast<const uint4*>(in);
          const E* values = reinterpret_cast<const E*>(&packed);
#pragma unroll
          for (int v = 0; v < VEC; ++v) sum[v] += to_float(values[v]);
        }
      }
      E* out = d_x + n * width + e;
      if constexpr (VEC == 1) {
        out[0] = from_float<E>(sum[0]);
      } else {
        uint4 packed;
        E* values = reinterpret_cast<E*>(&packed);
#pragma unroll
        for (int v = 0; v < VEC; ++v) values[v] = from_float<E>(sum[v]);
        *reinterpret_cast<uint4*>(out) = packed;
      }
    }
  }
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535)); }

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void gather_rows(const void* x, const int32_t* index, int64_t y_rows, int64_t width, int element_bytes, void* y,
                 cudaStream_t stream) {
  if (y_rows == 0 || width == 0) return;
  const int64_t bytes = width * element_bytes;
  if (bytes % 16 == 0 && aligned16(x) && aligned16(y)) {
    gather_rows_kernel<uint4><<<blocks_for(y_rows), kThreads, 0, stream>>>(
        static_cast<const uint4*>(x), index, y_rows, bytes / 16, static_cast<uint4*>(y));
  } else {
    gather_rows_kernel<unsigned char><<<blocks_for(y_rows), kThreads, 0, stream>>>(
        static_cast<const unsigned char*>(x), index, y_rows, bytes, static_cast<unsigned char*>(y));
  }
  CUDA_CHECK(cudaGetLastError());
}

template <typename E>
void gather_rows_sum(const E* d_y, const int32_t* sources, int64_t x_rows, int64_t fan_in, int64_t width, E* d_x,
                     cudaStream_t stream) {
  if (x_rows == 0 || width == 0) return;
  constexpr int kVec = 16 / static_cast<int>(sizeof(E));
  if ((width * static_cast<int64_t>(sizeof(E))) % 16 == 0 && aligned16(d_y) && aligned16(d_x)) {
    gather_rows_sum_kernel<E, kVec><<<blocks_for(x_rows), kThreads, 0, stream>>>(d_y, sources, x_rows, fan_in, width, d_x);
  } else {
    gather_rows_sum_kernel<E, 1><<<blocks_for(x_rows), kThreads, 0, stream>>>(d_y, sources, x_rows, fan_in, width, d_x);
  }
  CUDA_CHECK(cudaGetLastError());
}

template void gather_rows_sum<__nv_bfloat16>(const __nv_bfloat16*, const int32_t*, int64_t, int64_t, int64_t,
                                             __nv_bfloat16*, cudaStream_t);
template void gather_rows_sum<__half>(const __half*, const int32_t*, int64_t, int64_t, int64_t, __half*, cudaStream_t);
template void gather_rows_sum<float>(const float*, const int32_t*, int64_t, int64_t, int64_t, float*, cudaStream_t);

}  // namespace surogate::cuda
