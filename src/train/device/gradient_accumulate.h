// Gradient accumulation for the CUDA training device: the bf16 gradients one micro-batch's
// backward pass wrote are added into the accumulators and then zeroed, for many tensors in one
// launch (grid.y = tensor). The accumulators are fp32 (gradient_dtype fp32, the default) or bf16
// (gradient_dtype bf16: the fp32 sum of accumulator and gradient rounded to nearest bf16, half
// the memory). fp16 training (torch_dtype: float16) adds its fp16 gradients into fp32
// accumulators the same way (accumulate_fp16_gradients).
// Under ZeRO-2/3 (sharded_gradients.h) the same kernel copies the micro-batch's
// gradients into a zeroed staging slot, and add_reduced_gradients adds the rank's reduced piece of
// it into the shard's accumulators. Plain host launcher on a stream; no fmt or graph headers so
// nvcc sees only this.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::train::cuda_kernels {

// For t < tensor_count: accumulators[t][i] += float(gradients[t][i]); gradients[t][i] = 0.
// The pointer and count arrays live on the device.
void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, float* const* accumulators, const int64_t* counts,
                               int tensor_count, cudaStream_t stream);
void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, __nv_bfloat16* const* accumulators,
                               const int64_t* counts, int tensor_count, cudaStream_t stream);

// The same for fp16 gradients into fp32 accumulators.
void accumulate_fp16_gradients(__half* const* gradients, float* const* accumulators, const int64_t* counts,
                               int tensor_count, cudaStream_t stream);

// accumulators[i] += values[i] for i < count (bf16: the fp32 sum rounded to nearest, as above).
void add_reduced_gradients(const float* values, float* accumulators, int64_t count, cudaStream_t stream);
void add_reduced_gradients(const __nv_bfloat16* values, __nv_bfloat16* accumulators, int64_t count,
                           cudaStream_t stream);

}  // namespace surogate::train::cuda_kernels
