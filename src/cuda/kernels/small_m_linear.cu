// The small-M linear of small_m_linear.h. A block of kLinearWarps warps makes kColumnsPerWarp output
// columns per warp; lane l reads 16-byte chunks l, l + 32, ... of each of its W rows (kUnroll
// chunks per row in flight) and of every x row, and keeps M × kColumnsPerWarp fp32 partial sums;
// a warp shuffle sums them, lane 0 adds the bias / addend and writes.
#include "cuda/kernels/small_m_linear.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

using kernels::ElementTraits;
using kernels::from_float;
using kernels::to_float;

constexpr int kLinearWarps = 4;
constexpr int kColumnsPerWarp = 4;
constexpr int kUnroll = 4;
constexpr int kColumnsPerBlock = kLinearWarps * kColumnsPerWarp;
constexpr int kElementsPerChunk = 8;  // 16 bytes of 16-bit values

// The 8 values of a 16-byte chunk as floats.
template <typename T>
__device__ __forceinline__ void chunk_to_floats(const uint4& chunk, float (&values)[kElementsPerChunk]) {
  using Pair = typename ElementTraits<T>::Pair;
  const Pair* pairs = reinterpret_cast<const Pair*>(&chunk);
#pragma unroll
  for (int i = 0; i < kElementsPerChunk / 2; ++i) {
    const float2 pair = ElementTraits<T>::to_float2(pairs[i]);
    values[2 * i] = pair.x;
    values[2 * i + 1] = pair.y;
  }
}

// W is read once per call: streamed past L1 (no reuse), x stays cached (every warp reads it).
__device__ __forceinline__ uint4 load_streaming(const uint4* pointer) { return __ldcs(pointer); }

template <typename T, int M>
__global__ void __launch_bounds__(kLinearWarps * 32)
    small_m_linear_kernel(T* out, const T* x, const T* weight, const T* bias, const T* addend, int64_t n, int64_t k,
                          float alpha) {
  const int lane = threadIdx.x % 32;
  const int64_t first_column = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + (threadIdx.x / 32) * kColumnsPerWarp;
  if (first_column >= n) return;  // the whole warp together
  const int64_t chunks = k / kElementsPerChunk;
  const uint4* x_chunks = reinterpret_cast<const uint4*>(x);
  const uint4* w_rows[kColumnsPerWarp];
#pragma unroll
  for (int c = 0; c < kColumnsPerWarp; ++c) {
    // A column past N re-reads the last row (its sum is never written): no branch in the loop.
    const int64_t column = first_column + c < n ? first_column + c : n - 1;
    w_rows[c] = reinterpret_cast<const uint4*>(weight + column * k);
  }
  float sums[kColumnsPerWarp][M];
#pragma unroll
  for (int c = 0; c < kColumnsPerWarp; ++c) {
#pragma unroll
    for (int m = 0; m < M; ++m) sums[c][m] = 0.0f;
  }
  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    uint4 w[kColumnsPerWarp][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = base + 32 * u;
#pragma unroll
      for (int c = 0; c < kColumnsPerWarp; ++c) {
        w[c][u] = chunk < chunks ? load_streaming(w_rows[c] + chunk) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = base + 32 * u;
      if (chunk >= chunks) break;
      // Each chunk converted once: W's for every row of x, x's for every column.
      float wf[kColumnsPerWarp][kElementsPerChunk];
#pragma unroll
      for (int c = 0; c < kColumnsPerWarp; ++c) chunk_to_floats<T>(w[c][u], wf[c]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kElementsPerChunk];
        chunk_to_floats<T>(__ldg(x_chunks + m * chunks + chunk), xf);
#pragma unroll
        for (int c = 0; c < kColumnsPerWarp; ++c) {
#pragma unroll
          for (int i = 0; i < kElementsPerChunk; ++i) sums[c][m] = fmaf(wf[c][i], xf[i], sums[c][m]);
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kColumnsPerWarp; ++c) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) sums[c][m] += __shfl_down_sync(0xffffffffu, sums[c][m], offset);
    }
  }
  if (lane != 0) return;
#pragma unroll
  for (int c = 0; c < kColumnsPerWarp; ++c) {
    const int64_t column = first_column + c;
    if (column >= n) break;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float value = alpha * sums[c][m];
      if (bias != nullptr) value += to_float(bias[column]);
      if (addend != nullptr) value += to_float(addend[m * n + column]);
      out[m * n + column] = from_float<T>(value);
    }
  }
}

template <typename T, int M>
void launch_small_m(T* out, const T* x, const T* weight, const T* bias, const T* addend, const SmallMLinearShape& shape,
            cudaStream_t stream) {
  const int64_t blocks = (shape.out + kColumnsPerBlock - 1) / kColumnsPerBlock;
  small_m_linear_kernel<T, M><<<static_cast<unsigned>(blocks), kLinearWarps * 32, 0, stream>>>(out, x, weight, bias, addend,
                                                                                          shape.out, shape.in, shape.alpha);
}

}  // namespace

bool small_m_linear_supported(const SmallMLinearShape& shape, const void* x, const void* weight) {
  const auto aligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  return shape.rows >= 1 && shape.rows <= kSmallMLinearMaxRows && shape.in > 0 && shape.in % kElementsPerChunk == 0 &&
         shape.out >= 1 && shape.out <= (int64_t{1} << 31) && aligned(x) && aligned(weight);
}

template <typename T>
void small_m_linear(T* out, const T* x, const T* weight, const T* bias, const T* addend, const SmallMLinearShape& shape,
                    cudaStream_t stream) {
  switch (shape.rows) {
    case 1: launch_small_m<T, 1>(out, x, weight, bias, addend, shape, stream); break;
    case 2: launch_small_m<T, 2>(out, x, weight, bias, addend, shape, stream); break;
    case 3: launch_small_m<T, 3>(out, x, weight, bias, addend, shape, stream); break;
    case 4: launch_small_m<T, 4>(out, x, weight, bias, addend, shape, stream); break;
    case 5: launch_small_m<T, 5>(out, x, weight, bias, addend, shape, stream); break;
    case 6: launch_small_m<T, 6>(out, x, weight, bias, addend, shape, stream); break;
    case 7: launch_small_m<T, 7>(out, x, weight, bias, addend, shape, stream); break;
    default: launch_small_m<T, 8>(out, x, weight, bias, addend, shape, stream); break;
  }
  CUDA_CHECK_LAUNCH();
}

template void small_m_linear(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                             const __nv_bfloat16*, const SmallMLinearShape&, cudaStream_t);
template void small_m_linear(__half*, const __half*, const __half*, const __half*, const __half*,
                             const SmallMLinearShape&, cudaStream_t);

}  // namespace surogate::cuda
