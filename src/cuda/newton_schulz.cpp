// Newton–Schulz through cuBLAS (see newton_schulz.h).
#include "cuda/newton_schulz.h"

#include <algorithm>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/kernels/normuon.h"

namespace surogate::cuda {

NewtonSchulz::NewtonSchulz(int64_t max_values, int64_t max_gram_values, int64_t max_matrices)
    : max_values_(max_values), max_gram_values_(max_gram_values), max_matrices_(max_matrices),
      next_(static_cast<size_t>(max_values)),
      gram_(static_cast<size_t>(max_gram_values)),
      poly_(static_cast<size_t>(max_gram_values)),
      norm_(static_cast<size_t>(max_matrices)) {
  CUBLAS_CHECK(cublasCreate(&handle_));
  // Plain fp32 products (no TF32), as the CPU reference computes them.
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
}

NewtonSchulz::~NewtonSchulz() {
  if (handle_) cublasDestroy(handle_);
}

void NewtonSchulz::orthogonalize(float* x, int64_t matrices, int64_t rows, int64_t cols, cudaStream_t stream,
                                 int steps) {
  const int64_t count = rows * cols;
  const int64_t n = std::min(rows, cols), m = std::max(rows, cols);
  CUDA_REQUIRE(matrices * count <= max_values_ && matrices * n * n <= max_gram_values_ && matrices <= max_matrices_,
               "NewtonSchulz: stack larger than the workspace");
  CUDA_REQUIRE(m <= 0x7fffffff && matrices <= 0x7fffffff, "NewtonSchulz: matrix side too large for cuBLAS");
  if (count == 0 || matrices == 0) return;
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const float one = 1.0f, zero = 0.0f;
  const int in = static_cast<int>(n), im = static_cast<int>(m), batch = static_cast<int>(matrices);
  const long long stride = count, gram_stride = n * n;
  const bool wide = rows <= cols;
  CUBLAS_CHECK(cublasSetStream(handle_, stream));
  CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  frobenius_normalize(x, matrices, count, norm_.data(), stream);

  // Column-major, each matrix's memory is A = Xᵀ [m×n] when wide and A = X [n×m] when tall
  // (leading dimension `cols`). With X the wide n×m matrix:
  //   wide: G = AᵀA, X' = aX + PX ⇔ A' = aA + AP    tall: G = AAᵀ, A' = aA + PA
  float* current = x;
  float* next = next_.data();
  const size_t values_bytes = static_cast<size_t>(matrices * count) * sizeof(float);
  const size_t gram_bytes = static_cast<size_t>(matrices * n * n) * sizeof(float);
  for (int step = 0; step < steps; ++step) {
    if (wide) {
      CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, in, in, im, &one, current, im, stride,
                                             current, im, stride, &zero, gram_.data(), in, gram_stride, batch));
    } else {
      CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_T, in, in, im, &one, current, in, stride,
                                             current, in, stride, &zero, gram_.data(), in, gram_stride, batch));
    }
    // P = b G + c G G (G is symmetric, so its layout does not matter).
    CUDA_CHECK(cudaMemcpyAsync(poly_.data(), gram_.data(), gram_bytes, cudaMemcpyDeviceToDevice, stream));
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &c, gram_.data(), in,
                                           gram_stride, gram_.data(), in, gram_stride, &b, poly_.data(), in,
                                           gram_stride, batch));
    CUDA_CHECK(cudaMemcpyAsync(next, current, values_bytes, cudaMemcpyDeviceToDevice, stream));
    if (wide) {
      CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, im, in, in, &one, current, im, stride,
                                             poly_.data(), in, gram_stride, &a, next, im, stride, batch));
    } else {
      CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, in, im, in, &one, poly_.data(), in,
                                             gram_stride, current, in, stride, &a, next, in, stride, batch));
    }
    std::swap(current, next);
  }
  if (current != x) CUDA_CHECK(cudaMemcpyAsync(x, current, values_bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace surogate::cuda
