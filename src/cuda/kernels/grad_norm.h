// Global gradient L2 norm over many fp32 or bf16 tensors (gradient_dtype), and clipping by scaling.
//
//   pass 1: block (b, t) sums the squares of tensor t's elements b, b + B·256, ... into
//           partials[t·B + b]   (B = kGradNormBlocks, a fixed grid: the same order on every GPU)
//   pass 2: one block sums the partials in a fixed tree order:
//           result[0] = sqrt(Σ),  result[1] = min(1, max_norm / (norm + 1e-6))  (1 if max_norm ≤ 0)
// Bitwise deterministic. result[1] is the clip factor, read on the device by adamw_update
// (grad_scale) or scale_gradients, so the step never waits on the host.
// Tensors are passed as device arrays of pointers and element counts (built once per plan).
// Loads are 4-element vectors (16-byte fp32, 8-byte bf16) where a tensor's count is a multiple
// of 4 (such tensors must then start that aligned, as arena and cudaMalloc allocations do).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

constexpr int kGradNormBlocks = 64;

// partials: kGradNormBlocks · tensor_count floats. result: 2 floats.
void global_grad_norm(float* result, float* partials, const float* const* tensors, const int64_t* counts,
                      int tensor_count, float max_norm, cudaStream_t stream);
// The same over bf16 tensors (each element squared in fp32).
void global_grad_norm(float* result, float* partials, const __nv_bfloat16* const* tensors, const int64_t* counts,
                      int tensor_count, float max_norm, cudaStream_t stream);

// tensors[t][i] *= *scale for every element.
void scale_gradients(float* const* tensors, const int64_t* counts, int tensor_count, const float* scale,
                     cudaStream_t stream);

}  // namespace surogate::cuda
