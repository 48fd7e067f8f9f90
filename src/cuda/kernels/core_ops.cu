// Core-op kernels: grid-stride elementwise loops and a one-block deterministic sum; fp32, and bf16
// / fp16 for mul, scale_rows, broadcast and sum (computed in fp32, rounded once).
#include "cuda/kernels/core_ops.h"

#include <algorithm>
#include <type_traits>

#include <cuda_bf16.h>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/elementwise_launch.cuh"

namespace surogate::cuda {
namespace {

constexpr int kSumThreads = 1024;

using kernels::from_float;
using kernels::launch;
using kernels::to_float;

struct AddOp {
  const float* a; const float* b; float* out;
  __device__ void operator()(int64_t i) const { out[i] = __fadd_rn(a[i], b[i]); }
};
template <typename T>
struct MulOp {
  const T* a; const T* b; T* out;
  __device__ void operator()(int64_t i) const { out[i] = from_float<T>(__fmul_rn(to_float(a[i]), to_float(b[i]))); }
};
template <typename T>
struct ScaleRowsOp {
  const T* x; const T* factor; T* out; int64_t width;
  __device__ void operator()(int64_t i) const {
    out[i] = from_float<T>(__fmul_rn(to_float(x[i]), to_float(factor[i / width])));
  }
};
struct ScaleOp {
  const float* x; float factor; float* out;
  __device__ void operator()(int64_t i) const { out[i] = __fmul_rn(x[i], factor); }
};
struct MulScalarOp {
  const float* x; const float* factor; float* out;
  __device__ void operator()(int64_t i) const { out[i] = __fmul_rn(x[i], *factor); }
};
struct FillOp {
  float value; float* out;
  __device__ void operator()(int64_t i) const { out[i] = value; }
};
template <typename T>
struct BroadcastOp {
  const T* scalar; T* out;
  __device__ void operator()(int64_t i) const { out[i] = *scalar; }
};
struct AccumulateOp {
  const float* gradient; float* out;
  __device__ void operator()(int64_t i) const { out[i] = __fadd_rn(out[i], gradient[i]); }
};

// One block: each thread sums a strided slice in double, then a fixed shared-memory tree.
template <typename T>
__global__ void sum_kernel(const T* x, T* out, int64_t count) {
  __shared__ double partial[kSumThreads];
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) total += static_cast<double>(to_float(x[i]));
  partial[threadIdx.x] = total;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = from_float<T>(static_cast<float>(partial[0]));
}

}  // namespace

void add_f32(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream) {
  launch(AddOp{a, b, out}, count, stream);
}
void mul_f32(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream) {
  launch(MulOp<float>{a, b, out}, count, stream);
}
void scale_f32(const float* x, float factor, float* out, int64_t count, cudaStream_t stream) {
  launch(ScaleOp{x, factor, out}, count, stream);
}
void mul_scalar_f32(const float* x, const float* factor, float* out, int64_t count, cudaStream_t stream) {
  launch(MulScalarOp{x, factor, out}, count, stream);
}
void fill_f32(float value, float* out, int64_t count, cudaStream_t stream) { launch(FillOp{value, out}, count, stream); }
void broadcast_f32(const float* scalar, float* out, int64_t count, cudaStream_t stream) {
  launch(BroadcastOp<float>{scalar, out}, count, stream);
}
void accumulate_f32(const float* gradient, float* out, int64_t count, cudaStream_t stream) {
  launch(AccumulateOp{gradient, out}, count, stream);
}
void sum_f32(const float* x, float* out, int64_t count, cudaStream_t stream) {
  sum_kernel<<<1, kSumThreads, 0, stream>>>(x, out, count);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void mul_16bit(const E* a, const E* b, E* out, int64_t count, cudaStream_t stream) {
  launch(MulOp<E>{a, b, out}, count, stream);
}
template <typename T>
void scale_rows(const T* x, const T* factor, T* out, int64_t count, int64_t width, cudaStream_t stream) {
  launch(ScaleRowsOp<T>{x, factor, out, width}, count, stream);
}
template void scale_rows(const float*, const float*, float*, int64_t, int64_t, cudaStream_t);
template <typename E>
void broadcast_16bit(const E* scalar, E* out, int64_t count, cudaStream_t stream) {
  launch(BroadcastOp<E>{scalar, out}, count, stream);
}
template <typename E>
void sum_16bit(const E* x, E* out, int64_t count, cudaStream_t stream) {
  sum_kernel<<<1, kSumThreads, 0, stream>>>(x, out, count);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                        \
  template void mul_16bit(const E*, const E*, E*, int64_t, cudaStream_t);    \
  template void scale_rows(const E*, const E*, E*, int64_t, int64_t, cudaStream_t); \
  template void broadcast_16bit(const E*, E*, int64_t, cudaStream_t);        \
  template void sum_16bit(const E*, E*, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
