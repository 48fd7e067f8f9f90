// Launch helpers shared by the elementwise-style kernels (core_ops.cu, elementwise_16bit.cu, rope_tables.cu, ...): a fixed block size, a grid
// sized to the element count (capped; the kernels loop grid-stride with 64-bit indices) and
// `launch(op, count, stream)`, which runs op(i) for every i in [0, count).
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace surogate::cuda::kernels {

inline constexpr int kThreads = 256;

inline int grid_for(int64_t count) {
  return static_cast<int>(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, 65535 * 8));
}

template <typename Op>
__global__ void elementwise_kernel(Op op, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) op(i);
}

template <typename Op>
void launch(Op op, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  elementwise_kernel<<<grid_for(count), kThreads, 0, stream>>>(op, count);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda::kernels
