// Per-head RMSNorm + RoPE (see rmsnorm_rope.h): the two reference ops in sequence, the rotation
// one token at a time with that token's cos/sin row (rope_from_positions).
#include "ops/rmsnorm_rope.h"

#include <vector>

#include "core/error.h"
#include "ops/rmsnorm.h"

namespace surogate::ops {

template <typename T>
void rmsnorm_rope_forward(const T* x, const T* weight, const RopeFrequencies<T>& frequencies,
                          const int32_t* position_ids, const RmsnormRopeShape& shape, double eps, T* y,
                          T* rstd) {
  rmsnorm_forward(x, weight, shape.tokens * shape.heads, shape.head_dim, eps, y, rstd);
  rope_from_positions(y, frequencies, position_ids, shape.tokens, shape.heads, shape.head_dim, true, y);
}

template <typename T>
void rmsnorm_rope_backward(const T* d_y, const T* x, const T* weight, const T* rstd,
                           const RopeFrequencies<T>& frequencies, const int32_t* position_ids,
                           const RmsnormRopeShape& shape, T* d_x, T* d_weight) {
  // d_x holds ∂L/∂n after the rotation.
  rope_from_positions(d_y, frequencies, position_ids, shape.tokens, shape.heads, shape.head_dim, false, d_x);
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
