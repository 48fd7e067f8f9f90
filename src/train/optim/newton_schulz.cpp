#include "train/optim/newton_schulz.h"

#include <cblas.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace surogate::train {

void newton_schulz_orthogonalize(std::span<float> matrix, int64_t rows, int64_t cols, int steps) {
  SUROGATE_CHECK(static_cast<int64_t>(matrix.size()) == rows * cols, "matrix size mismatch");
  // Coefficients of p(x) = a x + b x^3 + c x^5, chosen to grow small singular values fast.
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;

  // Work on the wide orientation (n <= m) so the Gram matrix X·Xᵀ is the small one.
  const bool transpose = rows > cols;
  const int64_t n = transpose ? cols : rows;
  const int64_t m = transpose ? rows : cols;
  std::vector<float> x(matrix.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      float value = matrix[i * cols + j];
      if (transpose) x[j * rows + i] = value; else x[i * cols + j] = value;
    }
  }
  double norm = 0.0;
  for (float value : x) norm += static_cast<double>(value) * value;
  float scale = 1.0f / (static_cast<float>(std::sqrt(norm)) + 1e-7f);
  for (float& value : x) value *= scale;

  std::vector<float> gram(n * n), poly(n * n), next(n * m);
  for (int step = 0; step < steps; ++step) {
    // gram = X Xᵀ ; poly = b·gram + c·gram² ; X = a·X + poly·X
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, m, 1.0f, x.data(), m, x.data(), m, 0.0f, gram.data(), n);
    for (int64_t i = 0; i < n * n; ++i) poly[i] = b * gram[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, c, gram.data(), n, gram.data(), n, 1.0f, poly.data(), n);
    next = x;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, n, 1.0f, poly.data(), n, x.data(), m, a, next.data(), m);
    x.swap(next);
  }

  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) matrix[i * cols + j] = transpose ? x[j * rows + i] : x[i * cols + j];
  }
}

}  // namespace surogate::train
