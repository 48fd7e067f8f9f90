// LayerNorm as torch.nn.LayerNorm computes it over the last dimension (GPT-2, GPT-NeoX, Phi,
// StarCoder2, OLMo's ...), with or without a bias:
//   mean[r] = Σ_c x[r, c] / D,   rstd[r] = 1 / sqrt(Σ_c (x[r, c] − mean[r])² / D + eps)  (biased variance)
//   y[r, c] = (x[r, c] − mean[r]) · rstd[r] · weight[c] (+ bias[c])
// Saved for backward: mean and rstd [rows] (plus x). With x̂ = (x − mean) · rstd and g = d_y · weight:
//   d_x = rstd · (g − mean_c(g) − x̂ · mean_c(g · x̂))       WRITTEN (may alias d_y)
//   d_weight += Σ_rows d_y · x̂,   d_bias += Σ_rows d_y      ACCUMULATED; null skips them
// Means and reductions accumulate in double, also for T = float.
#pragma once

#include <cstdint>

namespace surogate::ops {

// bias may be null (a LayerNorm without bias).
template <typename T>
void layernorm_forward(const T* x, const T* weight, const T* bias, int64_t rows, int64_t dim, double eps, T* y,
                       T* mean, T* rstd);

template <typename T>
void layernorm_backward(const T* d_y, const T* x, const T* weight, const T* mean, const T* rstd, int64_t rows,
                        int64_t dim, T* d_x, T* d_weight, T* d_bias);

}  // namespace surogate::ops
