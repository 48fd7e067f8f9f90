// Qwen3's per-head q/k RMSNorm followed by RoPE, as one op (the decoder's q_norm → q_rope and
// k_norm → k_rope):
//   n = rmsnorm(x)  per head: rows = tokens · heads of head_dim values, one weight [head_dim]
//   y = rope(n)     rotate_half with each token's cos/sin (rope.h; partial rotary passes the tail)
// The cos/sin of a token are computed inside the op from the frequencies and its position id
// (rope_tables' formula), as the CUDA kernel does, so the op needs no table tensor. Forward and
// backward call the same functions as the unfused ops in the same order, so results are
// bit-identical to rmsnorm_forward → rope_tables → rope_forward and to rope_backward →
// rmsnorm_backward.
//
// x, y: [tokens, heads, head_dim]; rstd [tokens · heads] (saved with x for backward);
// rotary_dim = 2 · frequencies.inverse_frequency.size() ≤ head_dim.
// Gradient semantics: d_x WRITTEN, d_weight ACCUMULATED (+=) unless null (frozen weight).
#pragma once

#include <cstdint>

#include "ops/rope.h"

namespace surogate::ops {

struct RmsnormRopeShape {
  int64_t tokens = 0, heads = 0, head_dim = 0;
};

template <typename T>
void rmsnorm_rope_forward(const T* x, const T* weight, const RopeFrequencies<T>& frequencies,
                          const int32_t* position_ids, const RmsnormRopeShape& shape, double eps, T* y,
                          T* rstd);

template <typename T>
void rmsnorm_rope_backward(const T* d_y, const T* x, const T* weight, const T* rstd,
                           const RopeFrequencies<T>& frequencies, const int32_t* position_ids,
                           const RmsnormRopeShape& shape, T* d_x, T* d_weight);

}  // namespace surogate::ops
