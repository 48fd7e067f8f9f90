// NorMuon element-wise and per-row kernels (see normuon.h). Sums of squares accumulate in double,
// as the CPU optimizer does, so the normalisations agree with it closely.
#include <algorithm>
#include <cmath>

#include "cuda/cuda_check.h"
#include "cuda/kernels/normuon.h"
#include "cuda/kernels/optimizer_precision.cuh"

namespace surogate::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((count + kThreads - 1) / kThreads, 8192)));
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

__global__ void momentum_kernel(NorMuonGroup g, const float* grad_scale, float mu) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const float rest = __fsub_rn(1.0f, mu);
  const int64_t count = g.rows * g.cols, total = g.matrices * count;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / count, j = i - k * count;
    const float raw = g.grad ? g.grad[k][j] : __bfloat162float(g.grad_bf16[k][j]);
    const float gradient = grad_scale ? __fmul_rn(raw, scale) : raw;
    float* momentum = g.momentum[k];
    const float m = __fadd_rn(__fmul_rn(mu, momentum[j]), __fmul_rn(rest, gradient));
    momentum[j] = m;
    g.update[i] = __fadd_rn(__fmul_rn(mu, m), __fmul_rn(rest, gradient));
  }
}

// One block per row of the stacked direction.
__global__ void __launch_bounds__(kThreads) normalize_rows_kernel(NorMuonGroup g, float beta2) {
  __shared__ double shared[kThreads / 32];
  const int64_t k = blockIdx.x / g.rows, r = blockIdx.x - k * g.rows;
  float* row = g.update + static_cast<int64_t>(blockIdx.x) * g.cols;
  double square = 0.0;
  for (int64_t j = threadIdx.x; j < g.cols; j += kThreads) square += static_cast<double>(row[j]) * row[j];
  const double mean_square = block_sum(square, shared) / static_cast<double>(g.cols);
  float* second = g.second_moment[k] + r;
  // Every thread computes the same new moment; thread 0 stores it.
  const float moment = __fadd_rn(__fmul_rn(beta2, *second),
                                 __fmul_rn(__fsub_rn(1.0f, beta2), static_cast<float>(mean_square)));
  const float inverse = __fdiv_rn(1.0f, __fadd_rn(__fsqrt_rn(moment), kNorMuonEpsilon));
  double scaled = 0.0;
  for (int64_t j = threadIdx.x; j < g.cols; j += kThreads) {
    const float value = __fmul_rn(row[j], inverse);
    row[j] = value;
    scaled += static_cast<double>(value) * value;
  }
  scaled = block_sum(scaled, shared);
  if (threadIdx.x == 0) {
    *second = moment;
    atomicAdd(g.norms + k, scaled);
  }
}

__global__ void apply_kernel(NorMuonGroup g, double rms_numerator, float lr, float decay, bool cautious,
                             uint64_t rounding_step_key) {
  const int64_t count = g.rows * g.cols, total = g.matrices * count;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / count, j = i - k * count;
    const float rms_scale = static_cast<float>(rms_numerator / (sqrt(g.norms[k]) + kNorMuonEpsilon));
    const float u = __fmul_rn(g.update[i], rms_scale);
    float* master = g.master ? g.master[k] : nullptr;
    float w = master ? master[j] : __bfloat162float(g.params[k][j]);
    const bool decays = g.decays[k] != 0 && (!cautious || __fmul_rn(u, w) > 0.0f);
    w = __fsub_rn(w, __fmul_rn(lr, __fadd_rn(u, decays ? __fmul_rn(decay, w) : 0.0f)));
    if (master) {
      master[j] = w;
      if (g.params[k]) g.params[k][j] = __float2bfloat16(w);
    } else {
      const uint64_t key = rounding_parameter_key(rounding_step_key, g.parameter_index[k]);
      g.params[k][j] = kernels::stochastic_bf16(w, key, j);
    }
  }
}

__global__ void sum_of_squares_kernel(const float* x, int64_t count, double* sums) {
  __shared__ double shared[kThreads / 32];
  const float* matrix = x + static_cast<int64_t>(blockIdx.y) * count;
  double square = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    square += static_cast<double>(matrix[i]) * matrix[i];
  }
  square = block_sum(square, shared);
  if (threadIdx.x == 0) atomicAdd(sums + blockIdx.y, square);
}

__global__ void scale_by_inverse_norm_kernel(float* x, int64_t count, const double* sums) {
  float* matrix = x + static_cast<int64_t>(blockIdx.y) * count;
  const float scale = __fdiv_rn(1.0f, __fadd_rn(static_cast<float>(sqrt(sums[blockIdx.y])), 1e-7f));
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    matrix[i] = __fmul_rn(matrix[i], scale);
  }
}

}  // namespace

void normuon_momentum(const NorMuonGroup& group, const float* grad_scale, float mu, cudaStream_t stream) {
  const int64_t total = group.matrices * group.rows * group.cols;
  if (total == 0) return;
  momentum_kernel<<<grid_for(total), kThreads, 0, stream>>>(group, grad_scale, mu);
  CUDA_CHECK_LAUNCH();
}

void normuon_normalize_rows(const NorMuonGroup& group, float beta2, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(group.norms, 0, static_cast<size_t>(group.matrices) * sizeof(double), stream));
  const int64_t rows = group.matrices * group.rows;
  if (rows == 0 || group.cols == 0) return;
  CUDA_REQUIRE(rows <= 0x7fffffff, "normuon_normalize_rows: too many rows");
  normalize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(group, beta2);
  CUDA_CHECK_LAUNCH();
}

void normuon_apply(const NorMuonGroup& group, float learning_rate, float decay, bool cautious,
                   uint64_t rounding_step_key, cudaStream_t stream) {
  const int64_t count = group.rows * group.cols, total = group.matrices * count;
  if (total == 0) return;
  const double rms_numerator = 0.2 * std::sqrt(static_cast<double>(count));
  CUDA_REQUIRE(group.master || group.parameter_index, "normuon_apply: a bf16 master needs parameter indices");
  apply_kernel<<<grid_for(total), kThreads, 0, stream>>>(group, rms_numerator, learning_rate, decay, cautious,
                                                         rounding_step_key);
  CUDA_CHECK_LAUNCH();
}

void frobenius_normalize(float* x, int64_t matrices, int64_t count, double* sums, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(sums, 0, static_cast<size_t>(matrices) * sizeof(double), stream));
  if (matrices == 0 || count == 0) return;
  CUDA_REQUIRE(matrices <= 65535, "frobenius_normalize: at most 65535 matrices per call");
  // Blocks per matrix: enough to fill the GPU whether the group is many small or few large ones.
  const unsigned per_matrix = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((count + kThreads - 1) / kThreads, std::max<int64_t>(1, 1024 / matrices))));
  const dim3 grid(per_matrix, static_cast<unsigned>(matrices));
  sum_of_squares_kernel<<<grid, kThreads, 0, stream>>>(x, count, sums);
  CUDA_CHECK_LAUNCH();
  scale_by_inverse_norm_kernel<<<grid, kThreads, 0, stream>>>(x, count, sums);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
