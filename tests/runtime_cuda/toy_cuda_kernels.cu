// Toy-op kernels: deliberately simple (one thread per output / row, the CPU loop order).
#include "runtime_cuda/toy_cuda_kernels.h"

#include "cuda/cuda_check.h"

namespace surogate::testing::toy_cuda {
namespace {

constexpr int kThreads = 128;

int blocks_for(int64_t count) { return static_cast<int>((count + kThreads - 1) / kThreads); }

__global__ void matmul_kernel(const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k, bool ta,
                              bool tb) {
  int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= m * n) return;
  int64_t i = index / n, j = index % n;
  float total = 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    float av = ta ? a[p * m + i] : a[i * k + p];
    float bv = tb ? b[j * k + p] : b[p * n + j];
    total = __fadd_rn(total, __fmul_rn(av, bv));
  }
  out[index] = total;
}

__global__ void tanh_kernel(const float* x, float* out, int64_t count) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = tanhf(x[i]);
}

__global__ void tanh_backward_kernel(const float* y, const float* dy, float* dx, int64_t count) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) dx[i] = __fmul_rn(dy[i], __fsub_rn(1.0f, __fmul_rn(y[i], y[i])));
}

__global__ void norm_kernel(const float* x, float* out, float* rstd, int64_t rows, int64_t width, float eps) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = x + r * width;
  float squares = 0.0f;
  for (int64_t c = 0; c < width; ++c) squares = __fadd_rn(squares, __fmul_rn(row[c], row[c]));
  float s = 1.0f / sqrtf(squares / static_cast<float>(width) + eps);
  rstd[r] = s;
  for (int64_t c = 0; c < width; ++c) out[r * width + c] = __fmul_rn(row[c], s);
}

__global__ void norm_backward_kernel(const float* x, const float* rstd, const float* dy, float* dx, int64_t rows,
                                     int64_t width) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * width;
  const float* dyr = dy + r * width;
  float dot = 0.0f;
  for (int64_t c = 0; c < width; ++c) dot = __fadd_rn(dot, __fmul_rn(dyr[c], xr[c]));
  float s = rstd[r];
  for (int64_t c = 0; c < width; ++c) {
    dx[r * width + c] = s * dyr[c] - xr[c] * s * s * s * dot / static_cast<float>(width);
  }
}

}  // namespace

void matmul_f32(const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k, bool transpose_a,
                bool transpose_b, cudaStream_t stream) {
  matmul_kernel<<<blocks_for(m * n), kThreads, 0, stream>>>(a, b, out, m, n, k, transpose_a, transpose_b);
  CUDA_CHECK_LAUNCH();
}
void tanh_f32(const float* x, float* out, int64_t count, cudaStream_t stream) {
  tanh_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, out, count);
  CUDA_CHECK_LAUNCH();
}
void tanh_backward_f32(const float* y, const float* dy, float* dx, int64_t count, cudaStream_t stream) {
  tanh_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, dy, dx, count);
  CUDA_CHECK_LAUNCH();
}
void norm_f32(const float* x, float* out, float* rstd, int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  norm_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, out, rstd, rows, width, eps);
  CUDA_CHECK_LAUNCH();
}
void norm_backward_f32(const float* x, const float* rstd, const float* dy, float* dx, int64_t rows, int64_t width,
                       cudaStream_t stream) {
  norm_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, rstd, dy, dx, rows, width);
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::testing::toy_cuda
