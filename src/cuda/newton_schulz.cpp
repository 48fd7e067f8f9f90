// Newton–Schulz through cuBLAS (see newton_schulz.h).
#include "cuda/newton_schulz.h"

#include <algorithm>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/kernels/normuon.h"

namespace surogate::cuda {

NewtonSchulz::NewtonSchulz(int64_t max_count, int64_t max_small_side)
    : max_count_(max_count), max_small_side_(max_small_side),
      next_(static_cast<size_t>(max_count)),
      gram_(static_cast<size_t>(max_small_side * max_small_side)),
      poly_(static_cast<size_t>(max_small_side * max_small_side)),
      norm_(1) {
  CUBLAS_CHECK(cublasCreate(&handle_));
  // Plain fp32 products (no TF32), as the CPU reference computes them.
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
}

NewtonSchulz::~NewtonSchulz() {
  if (handle_) cublasDestroy(handle_);
}

void NewtonSchulz::orthogonalize(float* x, int64_t rows, int64_t cols, cudaStream_t stream, int steps) {
  const int64_t count = rows * cols;
  const int64_t n = std::min(rows, cols), m = std::max(rows, cols);
  CUDA_REQUIRE(count <= max_count_ && n <= max_small_side_, "NewtonSchulz: matrix larger than the workspace");
  CUDA_REQUIRE(m <= 0x7fffffff, "NewtonSchulz: matrix side too large for cuBLAS");
  if (count == 0) return;
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const float one = 1.0f, zero = 0.0f;
  const int in = static_cast<int>(n), im = static_cast<int>(m);
  const bool wide = rows <= cols;
  CUBLAS_CHECK(cublasSetStream(handle_, stream));
  CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  frobenius_normalize(x, count, norm_.data(), stream);

  // Column-major, the memory is A = Xᵀ [m×n] when wide and A = X [n×m] when tall (leading
  // dimension m or n, i.e. the row length `cols`). With X the wide n×m matrix:
  //   wide: G = AᵀA, X' = aX + PX ⇔ A' = aA + AP    tall: G = AAᵀ, A' = aA + PA
  float* current = x;
  float* next = next_.data();
  const size_t gram_bytes = static_cast<size_t>(n * n) * sizeof(float);
  for (int step = 0; step < steps; ++step) {
    if (wide) {
      CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, in, in, im, &one, current, im, current, im, &zero,
                               gram_.data(), in));
    } else {
      CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, in, in, im, &one, current, in, current, in, &zero,
                               gram_.data(), in));
    }
    // P = b G + c G G (G is symmetric, so its layout does not matter).
    CUDA_CHECK(cudaMemcpyAsync(poly_.data(), gram_.data(), gram_bytes, cudaMemcpyDeviceToDevice, stream));
    CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &c, gram_.data(), in, gram_.data(), in, &b,
                             poly_.data(), in));
    CUDA_CHECK(cudaMemcpyAsync(next, current, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice,
                               stream));
    if (wide) {
      CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, im, in, in, &one, current, im, poly_.data(), in, &a,
                               next, im));
    } else {
      CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, in, im, in, &one, poly_.data(), in, current, in, &a,
                               next, in));
    }
    std::swap(current, next);
  }
  if (current != x) {
    CUDA_CHECK(cudaMemcpyAsync(x, current, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice,
                               stream));
  }
}

}  // namespace surogate::cuda
