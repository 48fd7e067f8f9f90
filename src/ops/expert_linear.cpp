// Per-expert linears over expert-sorted rows; see expert_linear.h.
#include "ops/expert_linear.h"

#include "ops/linear.h"

namespace surogate::ops {

template <typename T>
void expert_linear_forward(const T* x, const T* weight, const int32_t* offsets, int64_t experts, int64_t in_features,
                           int64_t out_features, T* y) {
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    linear_forward<T>(x + first * in_features, weight + e * out_features * in_features, nullptr, rows, in_features,
                      out_features, y + first * out_features);
  }
}

template <typename T>
void expert_linear_backward_input(const T* d_y, const T* weight, const int32_t* offsets, int64_t experts,
                                  int64_t in_features, int64_t out_features, T* d_x) {
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    linear_backward<T>(d_y + first * out_features, nullptr, weight + e * out_features * in_features, rows, in_features,
                       out_features, d_x + first * in_features, nullptr, nullptr);
  }
}

template <typename T>
void expert_linear_backward_weight(const T* d_y, const T* x, const int32_t* offsets, int64_t experts,
                                   int64_t in_features, int64_t out_features, T* d_weight) {
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    linear_backward<T>(d_y + first * out_features, x + first * in_features, nullptr, rows, in_features, out_features,
                       nullptr, d_weight + e * out_features * in_features, nullptr);
  }
}

#define SUROGATE_INSTANTIATE(T)                                                                                  \
  template void expert_linear_forward<T>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, T*);      \
  template void expert_linear_backward_input<T>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, T*); \
  template void expert_linear_backward_weight<T>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, T*);
SUROGATE_INSTANTIATE(float)
SUROGATE_INSTANTIATE(double)
#undef SUROGATE_INSTANTIATE

}  // namespace surogate::ops
