// Global L2 norm, torch's clip coefficient and in-place scaling (see gradient_norm.h).
#include "ops/gradient_norm.h"

#include <algorithm>
#include <cmath>

namespace surogate::ops {

template <typename T>
double sum_of_squares(const T* data, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(data[i]) * data[i];
  return sum;
}

template <typename T>
double global_norm(std::span<const std::span<const T>> buffers) {
  double sum = 0.0;
  for (const std::span<const T>& buffer : buffers) {
    sum += sum_of_squares(buffer.data(), static_cast<int64_t>(buffer.size()));
  }
  return std::sqrt(sum);
}

double clip_coefficient(double total_norm, double max_norm) {
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

template <typename T>
void scale(T* data, int64_t count, T factor) {
  for (int64_t i = 0; i < count; ++i) data[i] *= factor;
}

template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);
template double global_norm<float>(std::span<const std::span<const float>>);
template double global_norm<double>(std::span<const std::span<const double>>);
template void scale<float>(float*, int64_t, float);
template void scale<double>(double*, int64_t, double);

}  // namespace surogate::ops
