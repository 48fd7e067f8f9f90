// Linear (plain and with an addend) and LoRA-linear forward/backward through cblas GEMMs (see linear.h). The bias
// gradient is reduced over rows in double so the float oracle does not drift with N.
#include "ops/linear.h"

#include <algorithm>
#include <vector>

#include "ops/blas.h"

namespace surogate::ops {

using detail::gemm;

template <typename T>
void linear_forward(const T* x, const T* weight, const T* bias, int64_t rows, int64_t in_features,
                    int64_t out_features, T* y) {
  gemm(false, true, rows, out_features, in_features, T(1), x, in_features, weight, in_features,
       T(0), y, out_features);
  if (bias == nullptr) return;
  for (int64_t row = 0; row < rows; ++row) {
    T* output = y + row * out_features;
    for (int64_t column = 0; column < out_features; ++column) output[column] += bias[column];
  }
}

template <typename T>
void linear_backward(const T* d_y, const T* x, const T* weight, int64_t rows, int64_t in_features,
                     int64_t out_features, T* d_x, T* d_weight, T* d_bias) {
  if (d_x != nullptr) {
    gemm(false, false, rows, in_features, out_features, T(1), d_y, out_features, weight,
         in_features, T(0), d_x, in_features);
  }
  if (d_weight != nullptr) {
    gemm(true, false, out_features, in_features, rows, T(1), d_y, out_features, x, in_features,
         T(1), d_weight, in_features);
  }
  if (d_bias != nullptr) {
    std::vector<double> sums(static_cast<size_t>(out_features), 0.0);
    for (int64_t row = 0; row < rows; ++row) {
      const T* gradient = d_y + row * out_features;
      for (int64_t column = 0; column < out_features; ++column) sums[column] += gradient[column];
    }
    for (int64_t column = 0; column < out_features; ++column) {
      d_bias[column] += static_cast<T>(sums[column]);
    }
  }
}

template <typename T>
void linear_add_forward(const T* x, const T* weight, const T* addend, int64_t rows, int64_t in_features,
                        int64_t out_features, T* y) {
  std::copy(addend, addend + rows * out_features, y);
  gemm(false, true, rows, out_features, in_features, T(1), x, in_features, weight, in_features, T(1), y,
       out_features);
}

template <typename T>
void linear_input_gradient_add(const T* d_y, const T* weight, const T* addend, int64_t rows, int64_t in_features,
                               int64_t out_features, T* d_x) {
  std::copy(addend, addend + rows * in_features, d_x);
  gemm(false, false, rows, in_features, out_features, T(1), d_y, out_features, weight, in_features, T(1), d_x,
       in_features);
}

template <typename T>
void lora_linear_forward(const T* x, const T* lora_a, const T* lora_b, int64_t rows,
                         int64_t in_features, int64_t rank, int64_t out_features, T scale,
                         T* hidden, T* y) {
  gemm(false, true, rows, rank, in_features, T(1), x, in_features, lora_a, in_features, T(0),
       hidden, rank);
  gemm(false, true, rows, out_features, rank, scale, hidden, rank, lora_b, rank, T(1), y,
       out_features);
}

template <typename T>
void lora_linear_backward(const T* d_y, const T* x, const T* lora_a, const T* lora_b,
                          const T* hidden, int64_t rows, int64_t in_features, int64_t rank,
                          int64_t out_features, T scale, T* d_x, T* d_a, T* d_b) {
  if (d_b != nullptr) {
    gemm(true, false, out_features, rank, rows, scale, d_y, out_features, hidden, rank, T(1), d_b,
         rank);
  }
  std::vector<T> d_hidden(static_cast<size_t>(rows * rank));
  gemm(false, false, rows, rank, out_features, scale, d_y, out_features, lora_b, rank, T(0),
       d_hidden.data(), rank);
  if (d_a != nullptr) {
    gemm(true, false, rank, in_features, rows, T(1), d_hidden.data(), rank, x, in_features, T(1),
         d_a, in_features);
  }
  if (d_x != nullptr) {
    gemm(false, false, rows, in_features, rank, T(1), d_hidden.data(), rank, lora_a, in_features,
         T(1), d_x, in_features);
  }
}

#define SUROGATE_INSTANTIATE_LINEAR(T)                                                             \
  template void linear_forward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*);    \
  template void linear_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*,    \
                                   T*, T*);                                                        \
  template void linear_add_forward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*); \
  template void linear_input_gradient_add<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*); \
  template void lora_linear_forward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t,    \
                                       int64_t, T, T*, T*);                                        \
  template void lora_linear_backward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, \
                                        int64_t, int64_t, int64_t, T, T*, T*, T*);
SUROGATE_INSTANTIATE_LINEAR(float)
SUROGATE_INSTANTIATE_LINEAR(double)
#undef SUROGATE_INSTANTIATE_LINEAR

}  // namespace surogate::ops
