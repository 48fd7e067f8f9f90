// fp32 kernels for the engine's core ops on the CUDA backend (add, mul, scale, scale_by, scale_rows, fill, sum,
// broadcast, accumulate), and bf16 / fp16 (E) mul, broadcast and sum, which BF16 / F16 graphs use where a loss is a
// product summed (a pipeline stage's loss Σ sum(t · g_t) over the tensors it sends,
// distributed/pipeline_graph.h, and its gradient: broadcast, then mul; each element computed in
// fp32 and rounded once). Plain host launchers on a stream, checked after every launch; no fmt or
// graph headers so nvcc sees only this. `sum` is one block with a fixed reduction order and double
// accumulation (like the CPU reference), so it is deterministic run to run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

void add_f32(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
void mul_f32(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
// out = x * factor, factor rounded to float first (as the CPU kernel does).
void scale_f32(const float* x, float factor, float* out, int64_t count, cudaStream_t stream);
// out = x * factor[0] (a device pointer: scale_by).
void mul_scalar_f32(const float* x, const float* factor, float* out, int64_t count, cudaStream_t stream);
void fill_f32(float value, float* out, int64_t count, cudaStream_t stream);
// out[i] = scalar[0] (a device pointer).
void broadcast_f32(const float* scalar, float* out, int64_t count, cudaStream_t stream);
// out += gradient.
void accumulate_f32(const float* gradient, float* out, int64_t count, cudaStream_t stream);
// out[0] = sum of x, accumulated in double.
void sum_f32(const float* x, float* out, int64_t count, cudaStream_t stream);

template <typename E>
void mul_16bit(const E* a, const E* b, E* out, int64_t count, cudaStream_t stream);
// out[i] = x[i] * factor[i / width] (scale_rows), each product in fp32 rounded once; T = float, bf16
// or fp16.
template <typename T>
void scale_rows(const T* x, const T* factor, T* out, int64_t count, int64_t width, cudaStream_t stream);
template <typename E>
void broadcast_16bit(const E* scalar, E* out, int64_t count, cudaStream_t stream);
template <typename E>
void sum_16bit(const E* x, E* out, int64_t count, cudaStream_t stream);

}  // namespace surogate::cuda
