// RMSNorm forward/backward and the fused residual-add variant (see rmsnorm.h for the math).
// Backward: with n = x * rstd and g = d_y * weight,
//   d_weight += sum_r d_y * n ;  d_x = rstd * (g - n * mean_c(g * n)).
#include "ops/rmsnorm.h"

#include <cmath>
#include <vector>

namespace surogate::ops {

template <typename T>
void rmsnorm_forward(const T* x, const T* weight, int64_t rows, int64_t dim, double eps, T* y,
                     T* rstd) {
  for (int64_t row = 0; row < rows; ++row) {
    const T* input = x + row * dim;
    double sum_of_squares = 0.0;
    for (int64_t c = 0; c < dim; ++c) sum_of_squares += static_cast<double>(input[c]) * input[c];
    const T inverse =
        static_cast<T>(1.0 / std::sqrt(sum_of_squares / static_cast<double>(dim) + eps));
    rstd[row] = inverse;
    T* output = y + row * dim;
    for (int64_t c = 0; c < dim; ++c) {
      const T normalized = input[c] * inverse;
      output[c] = weight[c] * normalized;
    }
  }
}

template <typename T>
void rmsnorm_backward(const T* d_y, const T* x, const T* weight, const T* rstd, int64_t rows,
                      int64_t dim, T* d_x, T* d_weight) {
  std::vector<double> weight_gradient(static_cast<size_t>(dim), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const T* input = x + row * dim;
    const T* gradient = d_y + row * dim;
    const double inverse = rstd[row];
    double projection = 0.0;  // sum_c g * n
    for (int64_t c = 0; c < dim; ++c) {
      const double normalized = input[c] * inverse;
      const double scaled_gradient = static_cast<double>(gradient[c]) * weight[c];
      projection += scaled_gradient * normalized;
      weight_gradient[c] += static_cast<double>(gradient[c]) * normalized;
    }
    const double mean_projection = projection / static_cast<double>(dim);
    T* output = d_x + row * dim;
    for (int64_t c = 0; c < dim; ++c) {
      const double normalized = input[c] * inverse;
      const double scaled_gradient = static_cast<double>(gradient[c]) * weight[c];
      output[c] = static_cast<T>(inverse * (scaled_gradient - normalized * mean_projection));
    }
  }
  if (d_weight == nullptr) return;
  for (int64_t c = 0; c < dim; ++c) d_weight[c] += static_cast<T>(weight_gradient[c]);
}

template <typename T>
void fused_residual_rmsnorm_forward(const T* residual_in, const T* x, const T* weight, int64_t rows,
                                    int64_t dim, double eps, T* residual_out, T* y, T* rstd) {
  const int64_t count = rows * dim;
  for (int64_t i = 0; i < count; ++i) residual_out[i] = residual_in[i] + x[i];
  rmsnorm_forward(residual_out, weight, rows, dim, eps, y, rstd);
}

template <typename T>
void fused_residual_rmsnorm_backward(const T* d_y, const T* d_residual_out, const T* residual_out,
                                     const T* weight, const T* rstd, int64_t rows, int64_t dim,
                                     T* d_input, T* d_weight) {
  rmsnorm_backward(d_y, residual_out, weight, rstd, rows, dim, d_input, d_weight);
  if (d_residual_out == nullptr) return;
  const int64_t count = rows * dim;
  for (int64_t i = 0; i < count; ++i) d_input[i] += d_residual_out[i];
}

#define SUROGATE_INSTANTIATE_RMSNORM(T)                                                           \
  template void rmsnorm_forward<T>(const T*, const T*, int64_t, int64_t, double, T*, T*);         \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, T*, \
                                    T*);                                                          \
  template void fused_residual_rmsnorm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, \
                                                  double, T*, T*, T*);                            \
  template void fused_residual_rmsnorm_backward<T>(const T*, const T*, const T*, const T*,        \
                                                   const T*, int64_t, int64_t, T*, T*);
SUROGATE_INSTANTIATE_RMSNORM(float)
SUROGATE_INSTANTIATE_RMSNORM(double)
#undef SUROGATE_INSTANTIATE_RMSNORM

}  // namespace surogate::ops
