// Residual add: out = a + b (the decoder's skip connections). Its gradient passes through
// unchanged to both inputs; residual_add_backward WRITES d_out into d_a and d_b (either may be
// nullptr, and either may alias d_out). Layout-free: any contiguous buffer of `count` values.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void residual_add_forward(const T* a, const T* b, int64_t count, T* out);

template <typename T>
void residual_add_backward(const T* d_out, int64_t count, T* d_a, T* d_b);

}  // namespace surogate::ops
