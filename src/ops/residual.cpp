// Residual add forward and its pass-through backward (see residual.h).
#include "ops/residual.h"

#include <algorithm>

namespace surogate::ops {

template <typename T>
void residual_add_forward(const T* a, const T* b, int64_t count, T* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void residual_add_backward(const T* d_out, int64_t count, T* d_a, T* d_b) {
  if (d_a != nullptr && d_a != d_out) std::copy_n(d_out, count, d_a);
  if (d_b != nullptr && d_b != d_out) std::copy_n(d_out, count, d_b);
}

template void residual_add_forward<float>(const float*, const float*, int64_t, float*);
template void residual_add_forward<double>(const double*, const double*, int64_t, double*);
template void residual_add_backward<float>(const float*, int64_t, float*, float*);
template void residual_add_backward<double>(const double*, int64_t, double*, double*);

}  // namespace surogate::ops
