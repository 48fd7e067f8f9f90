// LayerNorm forward / backward (see layernorm.h): a row at a time, reductions in double.
#include "ops/layernorm.h"

#include <cmath>
#include <vector>

namespace surogate::ops {

template <typename T>
void layernorm_forward(const T* x, const T* weight, const T* bias, int64_t rows, int64_t dim, double eps, T* y,
                       T* mean, T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * dim;
    double sum = 0.0;
    for (int64_t c = 0; c < dim; ++c) sum += static_cast<double>(row[c]);
    const double row_mean = sum / static_cast<double>(dim);
    double squares = 0.0;
    for (int64_t c = 0; c < dim; ++c) {
      const double centred = static_cast<double>(row[c]) - row_mean;
      squares += centred * centred;
    }
    const T row_rstd = static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(dim) + eps));
    const T stored_mean = static_cast<T>(row_mean);
    mean[r] = stored_mean;
    rstd[r] = row_rstd;
    for (int64_t c = 0; c < dim; ++c) {
      const T normalised = (row[c] - stored_mean) * row_rstd;
      y[r * dim + c] = bias ? normalised * weight[c] + bias[c] : normalised * weight[c];
    }
  }
}

template <typename T>
void layernorm_backward(const T* d_y, const T* x, const T* weight, const T* mean, const T* rstd, int64_t rows,
                        int64_t dim, T* d_x, T* d_weight, T* d_bias) {
  std::vector<double> weight_sums(d_weight ? static_cast<size_t>(dim) : 0, 0.0);
  std::vector<double> bias_sums(d_bias ? static_cast<size_t>(dim) : 0, 0.0);
  std::vector<double> normalised(static_cast<size_t>(dim)), scaled(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    const T* gradient = d_y + r * dim;
    const T* row = x + r * dim;
    const double row_rstd = static_cast<double>(rstd[r]);
    double scaled_sum = 0.0, projected_sum = 0.0;
    for (int64_t c = 0; c < dim; ++c) {
      normalised[c] = (static_cast<double>(row[c]) - static_cast<double>(mean[r])) * row_rstd;
      scaled[c] = static_cast<double>(gradient[c]) * static_cast<double>(weight[c]);
      scaled_sum += scaled[c];
      projected_sum += scaled[c] * normalised[c];
      if (d_weight) weight_sums[c] += static_cast<double>(gradient[c]) * normalised[c];
      if (d_bias) bias_sums[c] += static_cast<double>(gradient[c]);
    }
    const double scaled_mean = scaled_sum / static_cast<double>(dim);
    const double projected_mean = projected_sum / static_cast<double>(dim);
    // Every d_y of the row was read above, so d_x may alias d_y.
    for (int64_t c = 0; c < dim; ++c) {
      d_x[r * dim + c] = static_cast<T>(row_rstd * (scaled[c] - scaled_mean - normalised[c] * projected_mean));
    }
  }
  for (int64_t c = 0; c < dim; ++c) {
    if (d_weight) d_weight[c] += static_cast<T>(weight_sums[c]);
    if (d_bias) d_bias[c] += static_cast<T>(bias_sums[c]);
  }
}

#define SUROGATE_INSTANTIATE_LAYERNORM(T)                                                                   \
  template void layernorm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, double, T*, T*, T*); \
  template void layernorm_backward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, T*, T*, T*);
SUROGATE_INSTANTIATE_LAYERNORM(float)
SUROGATE_INSTANTIATE_LAYERNORM(double)
#undef SUROGATE_INSTANTIATE_LAYERNORM

}  // namespace surogate::ops
