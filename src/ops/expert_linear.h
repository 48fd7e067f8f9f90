// The experts' matmul of a mixture-of-experts layer, CPU reference: rows sorted by expert
// (ops/moe_routing.h's moe_dispatch / moe_permute) times each expert's weight, one linear per
// expert over its row range. weight [E, out, in] (torch.nn.Linear's layout per expert), x [M, in],
// offsets [E + 1] with expert e owning rows [offsets[e], offsets[e + 1]).
//   expert_linear_forward:         y[r] = x[r] · W_eᵀ                      (WRITTEN)
//   expert_linear_backward_input:  d_x[r] = d_y[r] · W_e                   (WRITTEN)
//   expert_linear_backward_weight: d_W_e += Σ_{r of e} d_y[r]ᵀ · x[r]      (ACCUMULATED: an
//                                  expert without rows keeps what d_W_e held)
// Each expert is one cblas product (ops/linear.h); experts with no rows are skipped.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void expert_linear_forward(const T* x, const T* weight, const int32_t* offsets, int64_t experts, int64_t in_features,
                           int64_t out_features, T* y);

template <typename T>
void expert_linear_backward_input(const T* d_y, const T* weight, const int32_t* offsets, int64_t experts,
                                  int64_t in_features, int64_t out_features, T* d_x);

template <typename T>
void expert_linear_backward_weight(const T* d_y, const T* x, const int32_t* offsets, int64_t experts,
                                   int64_t in_features, int64_t out_features, T* d_weight);

}  // namespace surogate::ops
