// Gradient accumulation for the CUDA training device: the bf16 gradients one micro-batch's
// backward pass wrote are added into the accumulators and then zeroed, for many tensors in one
// launch. The accumulators are fp32 (gradient_dtype fp32, the default) or bf16 (gradient_dtype
// bf16: the fp32 sum of accumulator and gradient rounded to nearest bf16, half the memory). fp16
// training (torch_dtype: float16) adds its fp16 gradients into fp32 accumulators the same way
// (accumulate_fp16_gradients).
// Under ZeRO-2/3 (sharded_gradients.h) the same kernel copies the micro-batch's
// gradients into a zeroed staging slot, and add_reduced_gradients adds the rank's reduced piece of
// it into the shard's accumulators. Plain host launcher on a stream; no fmt or graph headers so
// nvcc sees only this.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/device_buffer.h"

namespace surogate::cuda {

// Elements one thread block adds: each tensor is cut into chunks of this many and every chunk gets
// a block, so that a 300M-element embedding and a 128-element norm take the GPU in proportion to
// their size (one grid-stride loop per tensor left the embedding on a few SMs: 8.7 ms per
// micro-batch for Qwen3-1.7B's on an H200).
inline constexpr int64_t kAccumulateChunk = 4096;

// The element counts of a table of tensors and where each tensor's chunks start (a prefix sum with
// one entry more than tensors), on the device for the kernels, the starts also on the host for
// the launch's size.
class GradientCounts {
public:
  GradientCounts() = default;
  explicit GradientCounts(const std::vector<int64_t>& counts);
  const int64_t* counts() const { return counts_.data(); }
  const int64_t* chunk_starts() const { return chunk_starts_.data(); }
  // Chunks of tensors [first, end).
  int64_t chunks(size_t first, size_t end) const { return host_chunk_starts_[end] - host_chunk_starts_[first]; }
  size_t size() const { return counts_.size(); }

private:
  std::vector<int64_t> host_chunk_starts_;
  cuda::DeviceBuffer<int64_t> counts_, chunk_starts_;
};

// For t in [first, end): accumulators[t][i] += float(gradients[t][i]); gradients[t][i] = 0.
// With `overwrite` the accumulators are not read: accumulators[t][i] = 0 + float(gradients[t][i]),
// the bits adding into zeroed accumulators gives (the first micro-batch of a step, which then
// needs no zeroing pass before it: train/device/cuda_rank/gradient_accumulators.h's deferred zeroing).
// The pointer tables live on the device and hold every tensor of `counts` (not from `first` on).
void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, float* const* accumulators, const GradientCounts& counts,
                               size_t first, size_t end, cudaStream_t stream, bool overwrite = false);
void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, __nv_bfloat16* const* accumulators,
                               const GradientCounts& counts, size_t first, size_t end, cudaStream_t stream,
                               bool overwrite = false);

// The same for fp16 gradients into fp32 accumulators.
void accumulate_fp16_gradients(__half* const* gradients, float* const* accumulators, const GradientCounts& counts,
                               size_t first, size_t end, cudaStream_t stream, bool overwrite = false);

// accumulators[i] += values[i] for i < count (bf16: the fp32 sum rounded to nearest, as above).
void add_reduced_gradients(const float* values, float* accumulators, int64_t count, cudaStream_t stream);
void add_reduced_gradients(const __nv_bfloat16* values, __nv_bfloat16* accumulators, int64_t count,
                           cudaStream_t stream);

}  // namespace surogate::cuda
