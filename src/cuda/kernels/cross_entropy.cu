// Fused softmax cross-entropy kernels (see cross_entropy.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/cross_entropy.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

constexpr int kThreads = 512;

// Online softmax statistics: running max and the sum of exp(x − max).
struct SoftmaxState {
  float max = -INFINITY;
  float sum = 0.0f;
  __device__ void add(float x) {
    if (x > max) {
      sum = sum * __expf(max - x) + 1.0f;
      max = x;
    } else {
      sum += __expf(x - max);
    }
  }
};

template <bool kVector, typename T>
__global__ void cross_entropy_kernel(T* logits, float* row_losses, const int32_t* labels, int64_t vocab,
                                     const float* grad_scale, const float* weights) {
  __shared__ float scratch[32];
  T* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int32_t label = labels[blockIdx.x];
  const bool valid = label >= 0 && label < vocab;
  const float weight = weights != nullptr ? weights[blockIdx.x] : 1.0f;  // uniform branch: null costs nothing
  const float label_logit = valid ? kernels::to_float(row[label]) : 0.0f;  // read before the row is overwritten

  SoftmaxState state;
  if constexpr (kVector) {
    for (int64_t column = threadIdx.x * kPackWidth; column < vocab; column += kThreads * kPackWidth) {
      float values[kPackWidth];
      kernels::unpack(kernels::load_x8(row + column), values);
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) state.add(values[i]);
    }
  } else {
    for (int64_t column = threadIdx.x; column < vocab; column += kThreads) state.add(kernels::to_float(row[column]));
  }
  const float row_max = kernels::block_max(state.max, scratch);
  const float local_sum = state.max == -INFINITY ? 0.0f : state.sum * __expf(state.max - row_max);
  const float row_sum = kernels::block_sum(local_sum, scratch);
  const float log_sum_exp = row_max + logf(row_sum);
  if (threadIdx.x == 0) row_losses[blockIdx.x] = valid ? weight * (log_sum_exp - label_logit) : 0.0f;
  if (grad_scale == nullptr) return;

  const float scale = valid ? *grad_scale * weight : 0.0f;
  if constexpr (kVector) {
    for (int64_t column = threadIdx.x * kPackWidth; column < vocab; column += kThreads * kPackWidth) {
      float values[kPackWidth];
      kernels::unpack(kernels::load_x8(row + column), values);
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) {
        const float target = column + i == label ? 1.0f : 0.0f;
        values[i] = (__expf(values[i] - log_sum_exp) - target) * scale;
      }
      kernels::store_x8(row + column, kernels::pack<T>(values));
    }
  } else {
    for (int64_t column = threadIdx.x; column < vocab; column += kThreads) {
      const float target = column == label ? 1.0f : 0.0f;
      row[column] = kernels::from_float<T>((__expf(kernels::to_float(row[column]) - log_sum_exp) - target) * scale);
    }
  }
}

__global__ void count_valid_kernel(int32_t* valid_count, float* grad_scale, const int32_t* labels, int64_t rows,
                                   int64_t vocab) {
  __shared__ float scratch[32];
  float count = 0.0f;  // exact in fp32 up to 2^24 per thread, and the block sum of integers is exact below 2^24
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) count += labels[row] >= 0 && labels[row] < vocab;
  count = kernels::block_sum(count, scratch);
  if (threadIdx.x == 0) {
    *valid_count = static_cast<int32_t>(count);
    *grad_scale = 1.0f / fmaxf(count, 1.0f);
  }
}

__global__ void sum_losses_kernel(float* loss_sum, const float* row_losses, int64_t rows) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) sum += row_losses[row];
  sum = kernels::block_sum(sum, scratch);
  if (threadIdx.x == 0) *loss_sum = sum;
}

}  // namespace

template <typename T>
void cross_entropy_forward_backward(T* logits, float* row_losses, const int32_t* labels, int64_t rows,
                                    int64_t vocab, const float* grad_scale, cudaStream_t stream,
                                    const float* weights) {
  CUDA_REQUIRE(vocab > 0, "cross_entropy: vocab must be positive");
  if (rows == 0) return;
  if (vocab % kPackWidth == 0) {
    cross_entropy_kernel<true, T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, row_losses, labels,
                                                                                     vocab, grad_scale, weights);
  } else {
    cross_entropy_kernel<false, T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, row_losses, labels,
                                                                                      vocab, grad_scale, weights);
  }
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_gradient_scale(int32_t* valid_count, float* grad_scale, const int32_t* labels, int64_t rows,
                                  int64_t vocab, cudaStream_t stream) {
  CUDA_REQUIRE(rows < (int64_t{1} << 24), "cross_entropy: at most 2^24 rows per batch");
  count_valid_kernel<<<1, 1024, 0, stream>>>(valid_count, grad_scale, labels, rows, vocab);
  CUDA_CHECK_LAUNCH();
}

void sum_row_losses(float* loss_sum, const float* row_losses, int64_t rows, cudaStream_t stream) {
  sum_losses_kernel<<<1, 1024, 0, stream>>>(loss_sum, row_losses, rows);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(T) \
  template void cross_entropy_forward_backward(T*, float*, const int32_t*, int64_t, int64_t, const float*, \
                                               cudaStream_t, const float*);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
