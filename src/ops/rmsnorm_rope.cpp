// Per-head RMSNorm + RoPE (see rmsnorm_rope.h): the two reference ops in sequence, the rotation
// one token at a time with that token's cos/sin row.
#include "ops/rmsnorm_rope.h"

#include <vector>

#include "core/error.h"
#include "ops/rmsnorm.h"

namespace surogate::ops {
namespace {

// Rotates `in` [tokens, heads, head_dim] into `out` (may be `in`) by +angle (forward) or −angle
// (backward).
template <typename T>
void rotate(const T* in, T* out, const RopeFrequencies<T>& frequencies, const int32_t* position_ids,
            const RmsnormRopeShape& shape, bool forward) {
  const int64_t half = static_cast<int64_t>(frequencies.inverse_frequency.size());
  SUROGATE_CHECK(half > 0 && 2 * half <= shape.head_dim, "rmsnorm_rope: rotary_dim {} must be within head_dim {}",
                 2 * half, shape.head_dim);
  std::vector<T> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
  const int64_t stride = shape.heads * shape.head_dim;
  for (int64_t token = 0; token < shape.tokens; ++token) {
    rope_tables(frequencies, position_ids + token, 1, cos.data(), sin.data());
    const T* source = in + token * stride;
    T* target = out + token * stride;
    if (forward) {
      rope_forward(source, cos.data(), sin.data(), 1, shape.heads, shape.head_dim, 2 * half, target);
    } else {
      rope_backward(source, cos.data(), sin.data(), 1, shape.heads, shape.head_dim, 2 * half, target);
    }
  }
}

}  // namespace

template <typename T>
void rmsnorm_rope_forward(const T* x, const T* weight, const RopeFrequencies<T>& frequencies,
                          const int32_t* position_ids, const RmsnormRopeShape& shape, double eps, T* y,
                          T* rstd) {
  rmsnorm_forward(x, weight, shape.tokens * shape.heads, shape.head_dim, eps, y, rstd);
  rotate(y, y, frequencies, position_ids, shape, true);
}

template <typename T>
void rmsnorm_rope_backward(const T* d_y, const T* x, const T* weight, const T* rstd,
                           const RopeFrequencies<T>& frequencies, const int32_t* position_ids,
                           const RmsnormRopeShape& shape, T* d_x, T* d_weight) {
  rotate(d_y, d_x, frequencies, position_ids, shape, false);  // d_x holds ∂L/∂n now
  // rmsnorm_backward may run in place (each d_x element is written after its d_y is read).
  rmsnorm_backward(d_x, x, weight, rstd, shape.tokens * shape.heads, shape.head_dim, d_x, d_weight);
}

#define SUROGATE_INSTANTIATE_RMSNORM_ROPE(T)                                                             \
  template void rmsnorm_rope_forward<T>(const T*, const T*, const RopeFrequencies<T>&, const int32_t*,   \
                                        const RmsnormRopeShape&, double, T*, T*);                        \
  template void rmsnorm_rope_backward<T>(const T*, const T*, const T*, const T*, const RopeFrequencies<T>&, \
                                         const int32_t*, const RmsnormRopeShape&, T*, T*);
SUROGATE_INSTANTIATE_RMSNORM_ROPE(float)
SUROGATE_INSTANTIATE_RMSNORM_ROPE(double)
#undef SUROGATE_INSTANTIATE_RMSNORM_ROPE

}  // namespace surogate::ops
