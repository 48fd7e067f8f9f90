// LayerNorm kernels (see layernorm.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/layernorm.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::to_float;

constexpr int kThreads = 256;
constexpr int64_t kRowsPerChunk = 64;  // rows one block of the parameter-gradient pass sums

int64_t chunk_count(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* weight, const T* bias,
                                         int64_t channels, float epsilon) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* in = x + row * channels;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) sum += to_float(in[c]);
  const float row_mean = kernels::block_sum(sum, scratch) / static_cast<float>(channels);
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const float centred = to_float(in[c]) - row_mean;
    squares += centred * centred;
  }
  const float row_rstd = rsqrtf(kernels::block_sum(squares, scratch) / static_cast<float>(channels) + epsilon);
  if (threadIdx.x == 0) {
    mean[row] = row_mean;
    rstd[row] = row_rstd;
  }
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    float y = (to_float(in[c]) - row_mean) * row_rstd * to_float(weight[c]);
    if (bias != nullptr) y += to_float(bias[c]);
    out[row * channels + c] = kernels::from_float<T>(y);
  }
}

// dx of one row per block. Every dy of the row is read before any dx is written (the two block
// sums are barriers), so dx may alias dy.
template <typename T>
__global__ void layernorm_input_gradient_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* mean,
                                                const float* rstd, int64_t channels) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float row_mean = mean[row], row_rstd = rstd[row];
  float scaled_sum = 0.0f, projected_sum = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const float g = to_float(dout[row * channels + c]) * to_float(weight[c]);
    scaled_sum += g;
    projected_sum += g * (to_float(x[row * channels + c]) - row_mean) * row_rstd;
  }
  const float scaled_mean = kernels::block_sum(scaled_sum, scratch) / static_cast<float>(channels);
  const float projected_mean = kernels::block_sum(projected_sum, scratch) / static_cast<float>(channels);
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const float g = to_float(dout[row * channels + c]) * to_float(weight[c]);
    const float normalised = (to_float(x[row * channels + c]) - row_mean) * row_rstd;
    dx[row * channels + c] = kernels::from_float<T>(row_rstd * (g - scaled_mean - normalised * projected_mean));
  }
}

// Column sums of dy · x̂ and dy over one chunk of rows: grid (column blocks, chunks); partials
// [chunks, C] for the weight, then [chunks, C] for the bias.
template <typename T>
__global__ void layernorm_parameter_partials_kernel(float* partials, const T* dout, const T* x, const float* mean,
                                                    const float* rstd, int64_t rows, int64_t channels) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int64_t chunk = blockIdx.y, first = chunk * kRowsPerChunk;
  const int64_t last = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
  float weight_sum = 0.0f, bias_sum = 0.0f;
  for (int64_t row = first; row < last; ++row) {
    const float dy = to_float(dout[row * channels + c]);
    weight_sum += dy * (to_float(x[row * channels + c]) - mean[row]) * rstd[row];
    bias_sum += dy;
  }
  partials[chunk * channels + c] = weight_sum;
  partials[(gridDim.y + chunk) * channels + c] = bias_sum;
}

__global__ void layernorm_parameter_sums_kernel(float* dweight, float* dbias, const float* partials, int64_t chunks,
                                                int64_t channels) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float weight_sum = 0.0f, bias_sum = 0.0f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    weight_sum += partials[chunk * channels + c];
    bias_sum += partials[(chunks + chunk) * channels + c];
  }
  if (dweight != nullptr) dweight[c] = weight_sum;
  if (dbias != nullptr) dbias[c] = bias_sum;
}

unsigned column_blocks(int64_t channels) { return static_cast<unsigned>((channels + kThreads - 1) / kThreads); }

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                       int64_t channels, float epsilon, cudaStream_t stream) {
  if (rows == 0) return;
  layernorm_forward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(out, mean, rstd, x, weight, bias,
                                                                                   channels, epsilon);
  CUDA_CHECK_LAUNCH();
}

int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t channels) { return 2 * chunk_count(rows) * channels; }

template <typename T>
void layernorm_backward(T* dx, float* dweight, float* dbias, float* scratch, const T* dout, const T* x,
                        const T* weight, const float* mean, const float* rstd, int64_t rows, int64_t channels,
                        cudaStream_t stream) {
  if (rows == 0) return;
  // The parameter pass reads dy, so it runs first: dx may overwrite dy.
  if (dweight != nullptr || dbias != nullptr) {
    const int64_t chunks = chunk_count(rows);
    CUDA_REQUIRE(chunks <= 65535, "layernorm_backward: at most 65535 chunks of 64 rows");
    layernorm_parameter_partials_kernel<T><<<dim3(column_blocks(channels), static_cast<unsigned>(chunks)), kThreads, 0,
                                             stream>>>(scratch, dout, x, mean, rstd, rows, channels);
    CUDA_CHECK_LAUNCH();
    layernorm_parameter_sums_kernel<<<column_blocks(channels), kThreads, 0, stream>>>(dweight, dbias, scratch, chunks,
                                                                                       channels);
    CUDA_CHECK_LAUNCH();
  }
  layernorm_input_gradient_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(dx, dout, x, weight, mean,
                                                                                           rstd, channels);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(T)                                                                                           \
  template void layernorm_forward(T*, float*, float*, const T*, const T*, const T*, int64_t, int64_t, float,     \
                                  cudaStream_t);                                                                 \
  template void layernorm_backward(T*, float*, float*, float*, const T*, const T*, const T*, const float*,       \
                                   const float*, int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
