// Token rows moved between two layouts of a micro-batch (prompt sharing's gathers around
// attention, data/prompt_sharing.h). A tensor is viewed as rows of `width` elements, one row per
// token of the flattened batch:
//   gather_rows      y[m] = x[index[m]]                 (zeros where index[m] = −1)
//   gather_rows_sum  d_x[n] = Σ_k d_y[sources[n, k]]    (k = 0 .. fan_in − 1 in order, −1 skipped)
// gather_rows_sum with `sources` the inverse of `index` (the m with index[m] = n, each once) is
// gather_rows' gradient. The sum runs in the element type (the CPU's f32 / f64); the GPU adds
// 16-bit rows in f32 and rounds once. Indices outside the rows are internal errors.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void gather_rows(const T* x, int64_t x_rows, const int32_t* index, int64_t y_rows, int64_t width, T* y);

template <typename T>
void gather_rows_sum(const T* d_y, int64_t y_rows, const int32_t* sources, int64_t x_rows, int64_t fan_in,
                     int64_t width, T* d_x);

}  // namespace surogate::ops
