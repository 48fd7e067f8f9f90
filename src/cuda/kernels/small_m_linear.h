// The linear layer of a decode step: out [M, N] = alpha · x [M, K] · Wᵀ (+ bias [N] | + addend
// [M, N]) for M ≤ kSmallMLinearMaxRows rows, W [N, K] row-major (the linear op's weight layout),
// 16-bit (bf16 or fp16) in and out, fp32 accumulation. A GEMV-style kernel: the product is a read
// of W at HBM bandwidth, which cuBLASLt's tiles at M = 1 reach about half of
// (docs/generation.md). Each warp makes a few output columns (rows of W), its lanes splitting K in
// 16-byte loads; every x row is reused from registers across those columns. The CUDA linear
// binders (runtime/cuda_linear_ops.cpp) dispatch to it when small_m_linear_supported holds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

inline constexpr int64_t kSmallMLinearMaxRows = 8;

struct SmallMLinearShape {
  int64_t rows = 0;   // M, 1..kSmallMLinearMaxRows
  int64_t out = 0;    // N
  int64_t in = 0;     // K, a multiple of 8
  float alpha = 1.0f;
};

// The shape rule (M in 1..8, K a positive multiple of 8, N ≥ 1) and 16-byte aligned x and W (the
// vector loads); bias / addend / out need no alignment.
bool small_m_linear_supported(const SmallMLinearShape& shape, const void* x, const void* weight);

// `bias` [N] or null; `addend` [M, N] or null (not both; neither may alias out). T: __nv_bfloat16 or __half.
template <typename T>
void small_m_linear(T* out, const T* x, const T* weight, const T* bias, const T* addend, const SmallMLinearShape& shape,
                    cudaStream_t stream);

}  // namespace surogate::cuda
