// The counter-based dropout; see dropout.h.
#include "cuda/kernels/dropout.h"

#include <algorithm>
#include <cmath>

#include "core/dropout_rate.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/elementwise_launch.cuh"

namespace surogate::cuda {
namespace {

using kernels::from_float;
using kernels::grid_for;
using kernels::kThreads;
using kernels::to_float;

// 8 elements per vector (16 bytes of bf16) where the count and pointers allow it.
bool vectorizable(int64_t count, const void* a, const void* b) {
  return count % 8 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
}

__device__ __forceinline__ uint64_t dropout_base(const int32_t* seed, uint64_t stream_id) {
  return dropout_mix(dropout_mix(static_cast<uint64_t>(static_cast<uint32_t>(*seed))) ^ stream_id);
}
// The four 16-bit draws of elements 4q .. 4q+3 (ops/dropout.h): draw j is bits 16j .. 16j+15.
__device__ __forceinline__ uint64_t dropout_draws(uint64_t base, uint64_t quad) { return dropout_mix(base ^ quad); }
__device__ __forceinline__ bool keeps(uint64_t draws, int lane, uint32_t threshold) {
  return static_cast<uint32_t>((draws >> (16 * lane)) & 0xffffu) >= threshold;
}

// out = (addend +) dropout(x). Vector form: 8 bf16 per thread (two hashes); scalar form otherwise.
template <typename E>
__global__ void dropout_16bit_kernel(const E* x, const E* addend, const int32_t* seed, uint64_t stream_id,
                                     uint32_t threshold, float keep_scale, E* out, int64_t count, bool vector) {
  const uint64_t base = dropout_base(seed, stream_id);
  if (*seed == kDropoutOffSeed) threshold = 0, keep_scale = 1.0f;  // dropout off: every element, unscaled
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector) {
    for (int64_t v = first; v < count / 8; v += stride) {
      uint4 packed = reinterpret_cast<const uint4*>(x)[v];
      uint4 extra = addend != nullptr ? reinterpret_cast<const uint4*>(addend)[v] : uint4{0, 0, 0, 0};
      E* values = reinterpret_cast<E*>(&packed);
      const E* sums = reinterpret_cast<const E*>(&extra);
      const uint64_t draws[2] = {dropout_draws(base, static_cast<uint64_t>(2 * v)),
                                 dropout_draws(base, static_cast<uint64_t>(2 * v + 1))};
      for (int j = 0; j < 8; ++j) {
        const float dropped = keeps(draws[j / 4], j % 4, threshold) ? to_float(values[j]) * keep_scale : 0.0f;
        values[j] = from_float<E>(addend != nullptr ? to_float(sums[j]) + dropped : dropped);
      }
      reinterpret_cast<uint4*>(out)[v] = packed;
    }
    return;
  }
  for (int64_t i = first; i < count; i += stride) {
    const uint64_t draws = dropout_draws(base, static_cast<uint64_t>(i) >> 2);
    const float dropped = keeps(draws, static_cast<int>(i & 3), threshold) ? to_float(x[i]) * keep_scale : 0.0f;
    out[i] = from_float<E>(addend != nullptr ? to_float(addend[i]) + dropped : dropped);
  }
}

__global__ void dropout_f32_kernel(const float* x, const float* addend, const int32_t* seed, uint64_t stream_id,
                                   uint32_t threshold, float keep_scale, float* out, int64_t count) {
  const uint64_t base = dropout_base(seed, stream_id);
  if (*seed == kDropoutOffSeed) threshold = 0, keep_scale = 1.0f;  // dropout off: every element, unscaled
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint64_t draws = dropout_draws(base, static_cast<uint64_t>(i) >> 2);
    const float dropped = keeps(draws, static_cast<int>(i & 3), threshold) ? x[i] * keep_scale : 0.0f;
    out[i] = addend != nullptr ? addend[i] + dropped : dropped;
  }
}

float keep_scale_of(double probability) {
  CUDA_REQUIRE(probability >= 0.0 && probability < 1.0, "dropout probability in [0, 1)");
  return static_cast<float>(dropout_keep_scale(probability));  // as the CPU op: the double rounded to T
}

}  // namespace


template <typename E>
void dropout_16bit(const E* x, const int32_t* seed, uint64_t stream_id, double probability, E* out, int64_t count,
                   cudaStream_t stream, const E* addend) {
  const float keep_scale = keep_scale_of(probability);
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, out) && (addend == nullptr || vectorizable(count, addend, out));
  dropout_16bit_kernel<E><<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(
      x, addend, seed, stream_id, dropout_threshold16(probability), keep_scale, out, count, vector);
  CUDA_CHECK_LAUNCH();
}

void dropout_f32(const float* x, const int32_t* seed, uint64_t stream_id, double probability, float* out, int64_t count,
                 cudaStream_t stream, const float* addend) {
  const float keep_scale = keep_scale_of(probability);
  if (count <= 0) return;
  dropout_f32_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, addend, seed, stream_id,
                                                               dropout_threshold16(probability), keep_scale, out,
                                                               count);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                   \
  template void dropout_16bit(const E*, const int32_t*, uint64_t, double, E*, int64_t, cudaStream_t, const E*);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
