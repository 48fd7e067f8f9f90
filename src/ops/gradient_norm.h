// Gradient clipping helpers, as torch.nn.utils.clip_grad_norm_ does it (L2 norm):
//   total_norm = sqrt(Σ over all buffers Σ g²)
//   coefficient = min(1, max_norm / (total_norm + 1e-6)) ; every gradient *= coefficient
// Sums of squares accumulate in double. Buffers are (pointer, count) views.
#pragma once

#include <cstdint>
#include <span>

namespace surogate::ops {

template <typename T>
double sum_of_squares(const T* data, int64_t count);

// sqrt of the summed squares of every buffer.
template <typename T>
double global_norm(std::span<const std::span<const T>> buffers);

// min(1, max_norm / (total_norm + 1e-6)), torch's clip coefficient.
double clip_coefficient(double total_norm, double max_norm);

// data *= factor, in place.
template <typename T>
void scale(T* data, int64_t count, T factor);

}  // namespace surogate::ops
