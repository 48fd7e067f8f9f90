// Bias gradients (column sums) and LM-head argmax hits; see reductions.h.
#include "cuda/kernels/reductions.h"

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/elementwise_launch.cuh"

namespace surogate::cuda {
namespace {

using kernels::from_float;
using kernels::kThreads;
using kernels::to_float;

template <typename E>
__global__ void bias_gradient_kernel(E* dbias, const E* dout, int64_t rows, int64_t columns) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= columns) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += to_float(dout[r * columns + c]);
  dbias[c] = from_float<E>(sum);
}

__global__ void count_to_float_kernel(const int32_t* count, float* out) { out[0] = static_cast<float>(count[0]); }

constexpr int kArgmaxThreads = 256;

template <typename E>
__global__ void argmax_hits_kernel(int32_t* hits, const E* logits, const int32_t* labels, int64_t vocab) {
  __shared__ float best_value[kArgmaxThreads];
  __shared__ int64_t best_index[kArgmaxThreads];
  const int64_t row = blockIdx.x;
  const int32_t label = labels[row];
  if (label < 0 || label >= vocab) return;  // whole block returns together
  float value = -INFINITY;
  int64_t index = vocab;
  for (int64_t c = threadIdx.x; c < vocab; c += kArgmaxThreads) {
    const float x = to_float(logits[row * vocab + c]);
    if (x > value) { value = x; index = c; }  // strided ascending: the first maximum of the slice
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int offset = kArgmaxThreads / 2; offset > 0; offset /= 2) {
    if (threadIdx.x < offset) {
      const float other = best_value[threadIdx.x + offset];
      const int64_t other_index = best_index[threadIdx.x + offset];
      if (other > best_value[threadIdx.x] || (other == best_value[threadIdx.x] && other_index < best_index[threadIdx.x])) {
        best_value[threadIdx.x] = other;
        best_index[threadIdx.x] = other_index;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && best_index[0] == label) atomicAdd(hits, 1);
}

}  // namespace

template <typename E>
void bias_gradient(E* dbias, const E* dout, int64_t rows, int64_t columns, cudaStream_t stream) {
  bias_gradient_kernel<E><<<static_cast<unsigned>((columns + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      dbias, dout, rows, columns);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void argmax_hits(int32_t* hits, const E* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  argmax_hits_kernel<E><<<static_cast<unsigned>(rows), kArgmaxThreads, 0, stream>>>(hits, logits, labels, vocab);
  CUDA_CHECK_LAUNCH();
}

void count_to_float(const int32_t* count, float* out, cudaStream_t stream) {
  count_to_float_kernel<<<1, 1, 0, stream>>>(count, out);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                      \
  template void bias_gradient(E*, const E*, int64_t, int64_t, cudaStream_t);                                 \
  template void argmax_hits(int32_t*, const E*, const int32_t*, int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
