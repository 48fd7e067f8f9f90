// Gradient accumulation for the CUDA training device: the bf16 gradients one micro-batch's
// backward pass wrote are added into the fp32 accumulators and then zeroed, for many tensors in
// one launch (grid.y = tensor), so accumulation over gradient_accumulation_steps happens in fp32.
// Plain host launcher on a stream; no fmt or graph headers so nvcc sees only this.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::train::cuda_kernels {

// For t < tensor_count: accumulators[t][i] += float(gradients[t][i]); gradients[t][i] = 0.
// The pointer and count arrays live on the device.
void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, float* const* accumulators, const int64_t* counts,
                               int tensor_count, cudaStream_t stream);

}  // namespace surogate::train::cuda_kernels
