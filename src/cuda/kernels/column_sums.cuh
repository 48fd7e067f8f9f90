// dweight[c] += Σ_p partials[p, c]: the last step of a norm's weight gradient (rmsnorm.cu,
// qk_norm_rope.cu), whose backward blocks each leave one row of per-channel partial sums.
//
// One thread per column summing every partial in turn left a 2048-wide norm's 512 partials on
// 8 blocks: 20 µs per norm per micro-batch on an H200, latency-bound. Here a block covers 32
// columns with kColumnSumRows threads per column, each summing every kColumnSumRows-th partial,
// then a fixed-order reduction over those threads: deterministic (the same bits every run),
// though not the strict increasing order of the old loop.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_check.h"

namespace surogate::cuda {

constexpr int kColumnSumRows = 16;

namespace {  // each including .cu file gets its own kernel (no relocatable device code)

__global__ void __launch_bounds__(32 * kColumnSumRows)
    add_column_sums_kernel(float* dweight, const float* partials, int partial_count, int channels) {
  __shared__ float sums[kColumnSumRows][32];
  const int column = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (column < channels) {
    for (int p = threadIdx.y; p < partial_count; p += kColumnSumRows) sum += partials[int64_t{p} * channels + column];
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < channels) {
    float total = sums[0][threadIdx.x];
#pragma unroll
    for (int r = 1; r < kColumnSumRows; ++r) total += sums[r][threadIdx.x];
    dweight[column] += total;
  }
}

}  // namespace

inline void add_column_sums(float* dweight, const float* partials, int partial_count, int64_t channels,
                            cudaStream_t stream) {
  add_column_sums_kernel<<<static_cast<unsigned>((channels + 31) / 32), dim3(32, kColumnSumRows), 0, stream>>>(
      dweight, partials, partial_count, static_cast<int>(channels));
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
