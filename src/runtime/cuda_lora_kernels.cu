// LoRA-side kernels; see runtime/cuda_lora_kernels.h.
#include "runtime/cuda_lora_kernels.h"

#include <algorithm>
#include <cmath>

#include "cuda/cuda_check.h"
#include "runtime/cuda_launch.cuh"

namespace surogate::runtime::cuda_kernels {
namespace {

using bf16 = __nv_bfloat16;

// 8 elements per vector (16 bytes of bf16) where the count and pointers allow it.
bool vectorizable(int64_t count, const void* a, const void* b) {
  return count % 8 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
}

// factor_on_device, when set, replaces factor (a graph scalar, read on the device).
__global__ void scale_bf16_kernel(const bf16* x, float factor, const float* factor_on_device, bf16* out, int64_t count,
                                  bool vector) {
  if (factor_on_device != nullptr) factor = *factor_on_device;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector) {
    for (int64_t v = first; v < count / 8; v += stride) {
      uint4 packed = reinterpret_cast<const uint4*>(x)[v];
      __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(pairs[j]);
        pairs[j] = __floats2bfloat162_rn(f.x * factor, f.y * factor);
      }
      reinterpret_cast<uint4*>(out)[v] = packed;
    }
    return;
  }
  for (int64_t i = first; i < count; i += stride) out[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * factor);
}

__device__ __forceinline__ uint64_t dropout_base(const int32_t* seed, uint64_t stream_id) {
  return dropout_mix(dropout_mix(static_cast<uint64_t>(static_cast<uint32_t>(*seed))) ^ stream_id);
}
__device__ __forceinline__ bool keeps(uint64_t base, uint64_t index, uint64_t threshold) {
  return (dropout_mix(base ^ index) >> 11) >= threshold;
}

__global__ void dropout_bf16_kernel(const bf16* x, const int32_t* seed, uint64_t stream_id, uint64_t threshold,
                                    float keep_scale, bf16* out, int64_t count, bool vector) {
  const uint64_t base = dropout_base(seed, stream_id);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector) {
    for (int64_t v = first; v < count / 8; v += stride) {
      uint4 packed = reinterpret_cast<const uint4*>(x)[v];
      bf16* values = reinterpret_cast<bf16*>(&packed);
      for (int j = 0; j < 8; ++j) {
        const bool keep = keeps(base, static_cast<uint64_t>(v * 8 + j), threshold);
        values[j] = keep ? __float2bfloat16_rn(__bfloat162float(values[j]) * keep_scale) : __float2bfloat16_rn(0.0f);
      }
      reinterpret_cast<uint4*>(out)[v] = packed;
    }
    return;
  }
  for (int64_t i = first; i < count; i += stride) {
    out[i] = keeps(base, static_cast<uint64_t>(i), threshold) ? __float2bfloat16_rn(__bfloat162float(x[i]) * keep_scale)
                                                              : __float2bfloat16_rn(0.0f);
  }
}

__global__ void dropout_f32_kernel(const float* x, const int32_t* seed, uint64_t stream_id, uint64_t threshold,
                                   float keep_scale, float* out, int64_t count) {
  const uint64_t base = dropout_base(seed, stream_id);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = keeps(base, static_cast<uint64_t>(i), threshold) ? x[i] * keep_scale : 0.0f;
  }
}

__global__ void convert_bf16_to_f32_kernel(const bf16* in, float* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = __bfloat162float(in[i]);
  }
}

float keep_scale_of(double probability) {
  CUDA_REQUIRE(probability >= 0.0 && probability < 1.0, "dropout probability in [0, 1)");
  return static_cast<float>(1.0 / (1.0 - probability));  // as the CPU op: the double quotient rounded to T
}

}  // namespace

uint64_t dropout_threshold(double probability) {
  return static_cast<uint64_t>(std::ceil(probability * 0x1.0p53));
}

void scale_bf16(const bf16* x, float factor, bf16* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, out);
  scale_bf16_kernel<<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(x, factor, nullptr, out, count,
                                                                                   vector);
  CUDA_CHECK_LAUNCH();
}

void scale_bf16_by(const bf16* x, const float* factor, bf16* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, out);
  scale_bf16_kernel<<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(x, 0.0f, factor, out, count,
                                                                                   vector);
  CUDA_CHECK_LAUNCH();
}

void dropout_bf16(const bf16* x, const int32_t* seed, uint64_t stream_id, double probability, bf16* out, int64_t count,
                  cudaStream_t stream) {
  const float keep_scale = keep_scale_of(probability);
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, out);
  dropout_bf16_kernel<<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(
      x, seed, stream_id, dropout_threshold(probability), keep_scale, out, count, vector);
  CUDA_CHECK_LAUNCH();
}

void dropout_f32(const float* x, const int32_t* seed, uint64_t stream_id, double probability, float* out, int64_t count,
                 cudaStream_t stream) {
  const float keep_scale = keep_scale_of(probability);
  if (count <= 0) return;
  dropout_f32_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, seed, stream_id, dropout_threshold(probability),
                                                               keep_scale, out, count);
  CUDA_CHECK_LAUNCH();
}

void convert_bf16_to_f32(const bf16* in, float* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  convert_bf16_to_f32_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, out, count);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::runtime::cuda_kernels
