// See gradient_accumulate.h. Memory-bound and tiny next to the backward pass: one grid-stride
// loop per tensor, 16-bit read, accumulator read-modify-write, 16-bit zero.
#include "train/device/gradient_accumulate.h"

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::train::cuda_kernels {
namespace {

__device__ __forceinline__ void add_into(float& accumulator, float gradient) { accumulator += gradient; }
__device__ __forceinline__ void add_into(__nv_bfloat16& accumulator, float gradient) {
  accumulator = __float2bfloat16(__bfloat162float(accumulator) + gradient);
}

template <typename Gradient, typename Accumulator>
__global__ void accumulate_kernel(Gradient* const* gradients, Accumulator* const* accumulators,
                                  const int64_t* counts) {
  const int tensor = blockIdx.y;
  Gradient* gradient = gradients[tensor];
  Accumulator* accumulator = accumulators[tensor];
  const int64_t count = counts[tensor];
  const Gradient zero = surogate::cuda::kernels::from_float<Gradient>(0.0f);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    add_into(accumulator[i], surogate::cuda::kernels::to_float(gradient[i]));
    gradient[i] = zero;
  }
}

__device__ __forceinline__ float widen(float value) { return value; }
__device__ __forceinline__ float widen(__nv_bfloat16 value) { return __bfloat162float(value); }

template <typename Accumulator>
__global__ void add_reduced_kernel(const Accumulator* values, Accumulator* accumulators, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    add_into(accumulators[i], widen(values[i]));
  }
}

template <typename Accumulator>
void launch_add_reduced(const Accumulator* values, Accumulator* accumulators, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t blocks = (count + 255) / 256;
  add_reduced_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(values, accumulators,
                                                                                              count);
  CUDA_CHECK_LAUNCH();
}

template <typename Gradient, typename Accumulator>
void launch(Gradient* const* gradients, Accumulator* const* accumulators, const int64_t* counts,
            int tensor_count, cudaStream_t stream) {
  if (tensor_count == 0) return;
  // 64 blocks of 256 threads per tensor: enough to fill the GPU for the large matrices, while
  // the small ones (norms, biases) finish in one pass.
  int remaining = tensor_count, first = 0;
  while (remaining > 0) {
    const int chunk = remaining < 65535 ? remaining : 65535;
    accumulate_kernel<<<dim3(64, chunk), 256, 0, stream>>>(gradients + first, accumulators + first, counts + first);
    CUDA_CHECK_LAUNCH();
    first += chunk;
    remaining -= chunk;
  }
}

}  // namespace

void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, float* const* accumulators, const int64_t* counts,
                               int tensor_count, cudaStream_t stream) {
  launch(gradients, accumulators, counts, tensor_count, stream);
}

void accumulate_bf16_gradients(__nv_bfloat16* const* gradients, __nv_bfloat16* const* accumulators,
                               const int64_t* counts, int tensor_count, cudaStream_t stream) {
  launch(gradients, accumulators, counts, tensor_count, stream);
}

void accumulate_fp16_gradients(__half* const* gradients, float* const* accumulators, const int64_t* counts,
                               int tensor_count, cudaStream_t stream) {
  launch(gradients, accumulators, counts, tensor_count, stream);
}

void add_reduced_gradients(const float* values, float* accumulators, int64_t count, cudaStream_t stream) {
  launch_add_reduced(values, accumulators, count, stream);
}

void add_reduced_gradients(const __nv_bfloat16* values, __nv_bfloat16* accumulators, int64_t count,
                           cudaStream_t stream) {
  launch_add_reduced(values, accumulators, count, stream);
}

}  // namespace surogate::train::cuda_kernels
