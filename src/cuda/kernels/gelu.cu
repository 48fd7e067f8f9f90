// GELU kernels (see gelu.h): a grid-stride loop, one element per thread and step.
#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/gelu.h"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kSqrtTwoOverPi = 0.79788456080286535588f;
constexpr float kInverseSqrtTwoPi = 0.39894228040143267794f;
constexpr float kCubic = 0.044715f;
constexpr float kQuick = 1.702f;

// σ(1.702 x), as ops/gelu.cpp computes it in fp32 (1 / (1 + e^(−1.702 x))).
__device__ __forceinline__ float quick_sigmoid(float x) { return 1.0f / (1.0f + expf(-kQuick * x)); }

__device__ __forceinline__ float gelu_value(float x, GeluForm form) {
  if (form == GeluForm::Quick) return x * quick_sigmoid(x);
  if (form == GeluForm::Tanh) return 0.5f * x * (1.0f + tanhf(kSqrtTwoOverPi * (x + kCubic * x * x * x)));
  return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
}

__device__ __forceinline__ float gelu_derivative(float x, GeluForm form) {
  if (form == GeluForm::Quick) {
    const float s = quick_sigmoid(x);
    return s + kQuick * x * s * (1.0f - s);
  }
  if (form == GeluForm::Tanh) {
    const float square = x * x;
    const float t = tanhf(kSqrtTwoOverPi * (x + kCubic * square * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrtTwoOverPi * (1.0f + 3.0f * kCubic * square);
  }
  return 0.5f * (1.0f + erff(x * kSqrtHalf)) + x * kInverseSqrtTwoPi * expf(-0.5f * x * x);
}

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* x, int64_t count, GeluForm form) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = kernels::from_float<T>(gelu_value(kernels::to_float(x[i]), form));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dx, const T* dout, const T* x, int64_t count, GeluForm form) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dx[i] = kernels::from_float<T>(kernels::to_float(dout[i]) * gelu_derivative(kernels::to_float(x[i]), form));
  }
}

unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* x, int64_t count, GeluForm form, cudaStream_t stream) {
  if (count == 0) return;
  gelu_forward_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(out, x, count, form);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void gelu_backward(T* dx, const T* dout, const T* x, int64_t count, GeluForm form, cudaStream_t stream) {
  if (count == 0) return;
  gelu_backward_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(dx, dout, x, count, form);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(T)                                                   \
  template void gelu_forward(T*, const T*, int64_t, GeluForm, cudaStream_t); \
  template void gelu_backward(T*, const T*, const T*, int64_t, GeluForm, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
