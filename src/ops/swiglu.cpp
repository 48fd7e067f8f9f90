// SwiGLU forward/backward on separate or fused gate/up buffers (see swiglu.h). Both layouts
// run the same row kernel with different strides, so they agree bit for bit.
#include "ops/swiglu.h"

#include <cmath>

namespace surogate::ops {
namespace {

template <typename T>
T sigmoid(T value) {
  return T(1) / (T(1) + std::exp(-value));
}

// gate / up rows are `stride` apart; out rows are `intermediate` apart.
template <typename T>
void forward_rows(const T* gate, const T* up, int64_t stride, int64_t rows, int64_t intermediate,
                  T* out) {
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t c = 0; c < intermediate; ++c) {
      const T g = gate[row * stride + c];
      out[row * intermediate + c] = g / (T(1) + std::exp(-g)) * up[row * stride + c];
    }
  }
}

template <typename T>
void backward_rows(const T* d_out, const T* gate, const T* up, int64_t stride, int64_t rows,
                   int64_t intermediate, T* d_gate, T* d_up) {
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t c = 0; c < intermediate; ++c) {
      const T g = gate[row * stride + c];
      const T u = up[row * stride + c];
      const T gradient = d_out[row * intermediate + c];
      const T s = sigmoid(g);
      d_gate[row * stride + c] = gradient * u * s * (T(1) + g * (T(1) - s));
      d_up[row * stride + c] = gradient * g * s;
    }
  }
}

}  // namespace

template <typename T>
void swiglu_forward(const T* gate, const T* up, int64_t rows, int64_t intermediate, T* out) {
  forward_rows(gate, up, intermediate, rows, intermediate, out);
}

template <typename T>
void swiglu_backward(const T* d_out, const T* gate, const T* up, int64_t rows, int64_t intermediate,
                     T* d_gate, T* d_up) {
  backward_rows(d_out, gate, up, intermediate, rows, intermediate, d_gate, d_up);
}

template <typename T>
void swiglu_fused_forward(const T* gate_up, int64_t rows, int64_t intermediate, T* out) {
  forward_rows(gate_up, gate_up + intermediate, 2 * intermediate, rows, intermediate, out);
}

template <typename T>
void swiglu_fused_backward(const T* d_out, const T* gate_up, int64_t rows, int64_t intermediate,
                           T* d_gate_up) {
  backward_rows(d_out, gate_up, gate_up + intermediate, 2 * intermediate, rows, intermediate,
                d_gate_up, d_gate_up + intermediate);
}

#define SUROGATE_INSTANTIATE_SWIGLU(T)                                                      \
  template void swiglu_forward<T>(const T*, const T*, int64_t, int64_t, T*);                \
  template void swiglu_backward<T>(const T*, const T*, const T*, int64_t, int64_t, T*, T*); \
  template void swiglu_fused_forward<T>(const T*, int64_t, int64_t, T*);                    \
  template void swiglu_fused_backward<T>(const T*, const T*, int64_t, int64_t, T*);
SUROGATE_INSTANTIATE_SWIGLU(float)
SUROGATE_INSTANTIATE_SWIGLU(double)
#undef SUROGATE_INSTANTIATE_SWIGLU

}  // namespace surogate::ops
