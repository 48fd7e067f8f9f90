// Global gradient norm and clipping kernels (see grad_norm.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/grad_norm.h"
#include "cuda/kernels/optimizer_precision.cuh"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void sum_squares_kernel(float* partials, const T* const* tensors, const int64_t* counts) {
  __shared__ float scratch[32];
  const T* data = tensors[blockIdx.y];
  const int64_t count = counts[blockIdx.y];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  float sum = 0.0f;
  if (count % 4 == 0) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count / 4; i += stride) {
      const float4 v = kernels::load4(data, i);
      sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count; i += stride) {
      const float value = kernels::load_gradient(data, i);
      sum += value * value;
    }
  }
  sum = kernels::block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x] = sum;
}

__global__ void finish_norm_kernel(float* result, const float* partials, int64_t partial_count, float max_norm) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < partial_count; i += blockDim.x) sum += partials[i];
  sum = kernels::block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    const float norm = sqrtf(sum);
    result[0] = norm;
    result[1] = max_norm > 0.0f ? fminf(1.0f, max_norm / (norm + 1e-6f)) : 1.0f;
  }
}

__global__ void scale_kernel(float* const* tensors, const int64_t* counts, const float* scale) {
  float* data = tensors[blockIdx.y];
  const int64_t count = counts[blockIdx.y];
  const float factor = *scale;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count; i += stride)
    data[i] *= factor;
}

template <typename T>
void launch_grad_norm(float* result, float* partials, const T* const* tensors, const int64_t* counts,
                      int tensor_count, float max_norm, cudaStream_t stream) {
  CUDA_REQUIRE(tensor_count > 0 && tensor_count <= 65535, "grad_norm: 1 to 65535 tensors");
  sum_squares_kernel<<<dim3(kGradNormBlocks, tensor_count), kThreads, 0, stream>>>(partials, tensors, counts);
  CUDA_CHECK_LAUNCH();
  finish_norm_kernel<<<1, 1024, 0, stream>>>(result, partials, int64_t{kGradNormBlocks} * tensor_count, max_norm);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void global_grad_norm(float* result, float* partials, const float* const* tensors, const int64_t* counts,
                      int tensor_count, float max_norm, cudaStream_t stream) {
  launch_grad_norm(result, partials, tensors, counts, tensor_count, max_norm, stream);
}

void global_grad_norm(float* result, float* partials, const __nv_bfloat16* const* tensors, const int64_t* counts,
                      int tensor_count, float max_norm, cudaStream_t stream) {
  launch_grad_norm(result, partials, tensors, counts, tensor_count, max_norm, stream);
}

void scale_gradients(float* const* tensors, const int64_t* counts, int tensor_count, const float* scale,
                     cudaStream_t stream) {
  CUDA_REQUIRE(tensor_count > 0 && tensor_count <= 65535, "grad_norm: 1 to 65535 tensors");
  scale_kernel<<<dim3(kGradNormBlocks, tensor_count), kThreads, 0, stream>>>(tensors, counts, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
