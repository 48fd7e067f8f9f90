// See weights_from_masters.h. Memory-bound: one grid-stride loop per tensor.
#include "cuda/kernels/weights_from_masters.h"

#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

// A float source is rounded to T; a source already of T is copied.
template <typename T, typename S>
__device__ T weight_from(S value) {
  if constexpr (std::is_same_v<T, S>) {
    return value;
  } else {
    return surogate::cuda::kernels::from_float<T>(value);
  }
}

template <typename T, typename S>
__global__ void weights_from_masters_kernel(T* const* weights, const S* const* masters, const int64_t* counts) {
  const int tensor = blockIdx.y;
  T* weight = weights[tensor];
  const S* master = masters[tensor];
  const int64_t count = counts[tensor];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    weight[i] = weight_from<T>(master[i]);
  }
}

template <typename T, typename S>
void launch_weights_from_masters(T* const* weights, const S* const* masters, const int64_t* counts,
                                 int tensor_count, cudaStream_t stream) {
  int first = 0;
  while (first < tensor_count) {
    const int chunk = tensor_count - first < 65535 ? tensor_count - first : 65535;
    weights_from_masters_kernel<<<dim3(64, chunk), 256, 0, stream>>>(weights + first, masters + first, counts + first);
    CUDA_CHECK_LAUNCH();
    first += chunk;
  }
}

__global__ void round_to_bf16_kernel(const float* master, __nv_bfloat16* weight, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    weight[i] = __float2bfloat16(master[i]);
  }
}

}  // namespace

void round_to_bf16(const float* master, __nv_bfloat16* weight, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  round_to_bf16_kernel<<<256, 256, 0, stream>>>(master, weight, count);
  CUDA_CHECK_LAUNCH();
}

void weights_from_masters(__nv_bfloat16* const* weights, const float* const* masters, const int64_t* counts,
                          int tensor_count, cudaStream_t stream) {
  launch_weights_from_masters(weights, masters, counts, tensor_count, stream);
}

void weights_from_masters(__half* const* weights, const float* const* masters, const int64_t* counts,
                          int tensor_count, cudaStream_t stream) {
  launch_weights_from_masters(weights, masters, counts, tensor_count, stream);
}

void weights_from_flat(__nv_bfloat16* const* weights, const __nv_bfloat16* const* sources, const int64_t* counts,
                       int tensor_count, cudaStream_t stream) {
  launch_weights_from_masters(weights, sources, counts, tensor_count, stream);
}

}  // namespace surogate::cuda
