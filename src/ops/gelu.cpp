// GELU forward / backward (see gelu.h), with torch's constants so that the tanh form matches
// transformers' "gelu_pytorch_tanh" and the erf form its "gelu".
#include "ops/gelu.h"

#include <cmath>

namespace surogate::ops {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;        // 1/√2
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;   // √(2/π)
constexpr double kInverseSqrtTwoPi = 0.39894228040143267794;  // 1/√(2π)
constexpr double kCubic = 0.044715;
constexpr double kQuick = 1.702;

template <typename T>
T quick_sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-T(kQuick) * x));
}

template <typename T>
T gelu_value(T x, GeluApproximation approximation) {
  if (approximation == GeluApproximation::Quick) return x * quick_sigmoid(x);
  if (approximation == GeluApproximation::Tanh) {
    const T inner = T(kSqrtTwoOverPi) * (x + T(kCubic) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(kSqrtHalf)));
}

template <typename T>
T gelu_derivative(T x, GeluApproximation approximation) {
  if (approximation == GeluApproximation::Quick) {
    const T s = quick_sigmoid(x);
    return s + T(kQuick) * x * s * (T(1) - s);
  }
  if (approximation == GeluApproximation::Tanh) {
    const T square = x * x;
    const T t = std::tanh(T(kSqrtTwoOverPi) * (x + T(kCubic) * square * x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kSqrtTwoOverPi) * (T(1) + T(3 * kCubic) * square);
  }
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
  const T pdf = T(kInverseSqrtTwoPi) * std::exp(T(-0.5) * x * x);
  return cdf + x * pdf;
}

}  // namespace

std::optional<GeluApproximation> gelu_approximation_from_name(std::string_view name) {
  if (name == "none") return GeluApproximation::None;
  if (name == "tanh") return GeluApproximation::Tanh;
  if (name == "quick") return GeluApproximation::Quick;
  return std::nullopt;
}

template <typename T>
void gelu_forward(const T* x, int64_t count, GeluApproximation approximation, T* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = gelu_value(x[i], approximation);
}

template <typename T>
void gelu_backward(const T* d_y, const T* x, int64_t count, GeluApproximation approximation, T* d_x) {
  for (int64_t i = 0; i < count; ++i) d_x[i] = d_y[i] * gelu_derivative(x[i], approximation);
}

#define SUROGATE_INSTANTIATE_GELU(T)                                          \
  template void gelu_forward<T>(const T*, int64_t, GeluApproximation, T*); \
  template void gelu_backward<T>(const T*, const T*, int64_t, GeluApproximation, T*);
SUROGATE_INSTANTIATE_GELU(float)
SUROGATE_INSTANTIATE_GELU(double)
#undef SUROGATE_INSTANTIATE_GELU

}  // namespace surogate::ops
