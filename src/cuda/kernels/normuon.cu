// NorMuon element-wise and per-row kernels (see normuon.h). Sums of squares accumulate in double,
// as the CPU optimizer does, so the normalisations agree with it closely.
#include <algorithm>
#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/kernels/normuon.h"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((count + kThreads - 1) / kThreads, 4096)));
}

__device__ __forceinline__ double block_sum(double value, double* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? shared[lane] : 0.0;
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  __syncthreads();
  return value;
}

__global__ void momentum_kernel(float* momentum, float* update, const float* grad, const float* grad_scale,
                                int64_t count, float mu) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const float rest = __fsub_rn(1.0f, mu);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad_scale ? __fmul_rn(grad[i], scale) : grad[i];
    const float m = __fadd_rn(__fmul_rn(mu, momentum[i]), __fmul_rn(rest, g));
    momentum[i] = m;
    update[i] = __fadd_rn(__fmul_rn(mu, m), __fmul_rn(rest, g));
  }
}

__global__ void __launch_bounds__(kThreads)
normalize_rows_kernel(float* update, float* second_moment, int64_t cols, float beta2, double* norm_squared) {
  __shared__ double shared[kThreads / 32];
  float* row = update + static_cast<int64_t>(blockIdx.x) * cols;
  double square = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) square += static_cast<double>(row[j]) * row[j];
  const double mean_square = block_sum(square, shared) / static_cast<double>(cols);
  // Every thread computes the same new moment; thread 0 stores it.
  const float moment = __fadd_rn(__fmul_rn(beta2, second_moment[blockIdx.x]),
                                 __fmul_rn(__fsub_rn(1.0f, beta2), static_cast<float>(mean_square)));
  const float inverse = __fdiv_rn(1.0f, __fadd_rn(__fsqrt_rn(moment), kNorMuonEpsilon));
  double scaled = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float value = __fmul_rn(row[j], inverse);
    row[j] = value;
    scaled += static_cast<double>(value) * value;
  }
  scaled = block_sum(scaled, shared);
  if (threadIdx.x == 0) {
    second_moment[blockIdx.x] = moment;
    atomicAdd(norm_squared, scaled);
  }
}

__global__ void apply_kernel(__nv_bfloat16* params, float* master, const float* update, int64_t count,
                             double rms_numerator, const double* norm_squared, float lr, float decay, bool cautious) {
  const float rms_scale = static_cast<float>(rms_numerator / (sqrt(*norm_squared) + kNorMuonEpsilon));
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = __fmul_rn(update[i], rms_scale);
    float w = master[i];
    const bool decays = !cautious || __fmul_rn(u, w) > 0.0f;
    w = __fsub_rn(w, __fmul_rn(lr, __fadd_rn(u, decays ? __fmul_rn(decay, w) : 0.0f)));
    master[i] = w;
    if (params) params[i] = __float2bfloat16(w);
  }
}

__global__ void sum_of_squares_kernel(const float* x, int64_t count, double* sum) {
  __shared__ double shared[kThreads / 32];
  double square = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    square += static_cast<double>(x[i]) * x[i];
  }
  square = block_sum(square, shared);
  if (threadIdx.x == 0) atomicAdd(sum, square);
}

__global__ void scale_by_inverse_norm_kernel(float* x, int64_t count, const double* sum) {
  const float scale = __fdiv_rn(1.0f, __fadd_rn(static_cast<float>(sqrt(*sum)), 1e-7f));
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(x[i], scale);
  }
}

}  // namespace

void normuon_momentum(float* momentum, float* update, const float* grad, const float* grad_scale, int64_t count,
                      float mu, cudaStream_t stream) {
  if (count == 0) return;
  momentum_kernel<<<grid_for(count), kThreads, 0, stream>>>(momentum, update, grad, grad_scale, count, mu);
  CUDA_CHECK_LAUNCH();
}

void normuon_normalize_rows(float* update, float* second_moment, int64_t rows, int64_t cols, float beta2,
                            double* norm_squared, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(norm_squared, 0, sizeof(double), stream));
  if (rows == 0 || cols == 0) return;
  CUDA_REQUIRE(rows <= 0x7fffffff, "normuon_normalize_rows: too many rows");
  normalize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(update, second_moment, cols, beta2,
                                                                               norm_squared);
  CUDA_CHECK_LAUNCH();
}

void normuon_apply(__nv_bfloat16* params, float* master, const float* update, int64_t rows, int64_t cols,
                   const double* norm_squared, float learning_rate, float decay, bool cautious, cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count == 0) return;
  const double rms_numerator = 0.2 * std::sqrt(static_cast<double>(count));
  apply_kernel<<<grid_for(count), kThreads, 0, stream>>>(params, master, update, count, rms_numerator, norm_squared,
                                                         learning_rate, decay, cautious);
  CUDA_CHECK_LAUNCH();
}

void frobenius_normalize(float* x, int64_t count, double* sum, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(double), stream));
  if (count == 0) return;
  sum_of_squares_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, count, sum);
  CUDA_CHECK_LAUNCH();
  scale_by_inverse_norm_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, count, sum);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
