// RMSNorm as Hugging Face Llama/Mistral/Qwen2/Qwen3 compute it, over the last dimension:
//   rstd[r]  = 1 / sqrt(mean_c(x[r, c]^2) + eps)
//   y[r, c]  = weight[c] * (x[r, c] * rstd[r])        (normalize first, then scale: HF's order)
// Qwen3's per-head q/k norm is the same op with rows = tokens * heads and dim = head_dim.
//
// The fused variant adds the residual stream first (the decoder layer's "h = h + f(h); norm(h)"):
//   residual_out = residual_in + x ;  y = rmsnorm(residual_out)
//
// Saved for backward: rstd [rows] (plus x, or residual_out for the fused op).
// Gradient semantics: d_x / d_input are WRITTEN, d_weight is ACCUMULATED (+=); a null d_weight
// (frozen weight) skips it.
// Sums of squares and the backward reductions accumulate in double, also for T = float.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void rmsnorm_forward(const T* x, const T* weight, int64_t rows, int64_t dim, double eps, T* y,
                     T* rstd);

// d_x = ∂L/∂x (written), d_weight += ∂L/∂weight. d_x may be d_y (each element is written after
// its d_y is read; rmsnorm_rope's backward relies on it).
template <typename T>
void rmsnorm_backward(const T* d_y, const T* x, const T* weight, const T* rstd, int64_t rows,
                      int64_t dim, T* d_x, T* d_weight);

template <typename T>
void fused_residual_rmsnorm_forward(const T* residual_in, const T* x, const T* weight, int64_t rows,
                                    int64_t dim, double eps, T* residual_out, T* y, T* rstd);

// The gradients of residual_in and x are identical, so both are WRITTEN once into d_input:
//   d_input = rmsnorm_backward(d_y) + d_residual_out
// d_residual_out is the gradient reaching residual_out from later layers (nullptr = zero).
template <typename T>
void fused_residual_rmsnorm_backward(const T* d_y, const T* d_residual_out, const T* residual_out,
                                     const T* weight, const T* rstd, int64_t rows, int64_t dim,
                                     T* d_input, T* d_weight);

}  // namespace surogate::ops
