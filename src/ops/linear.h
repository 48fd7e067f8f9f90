// Linear layer in torch.nn.Linear's layout: y[N, out] = x[N, in] · W[out, in]ᵀ (+ b[out]).
// Matmuls go through cblas (sgemm / dgemm), so this is also the CPU backend's matmul.
//
// LoRA on top of a linear (PEFT's convention, A [r, in], B [out, r], scale = alpha / r or
// alpha / sqrt(r) for rsLoRA, chosen by the caller):
//   y += scale · (x · Aᵀ) · Bᵀ
// lora_linear_forward saves hidden = x · Aᵀ [N, r] for its backward.
//
// linear_add (the LoRA output y + scale·(x·Aᵀ)·Bᵀ as one product with a separate addend):
//   y[N, out] = x · Wᵀ + addend      (addend [N, out], read only; y WRITTEN)
// linear_input_gradient_add (an input gradient that also sums the other contributions):
//   d_x[N, in] = d_y · W + addend     (addend [N, in], read only; d_x WRITTEN)
//
// Gradient semantics:
//   linear_backward:      d_x WRITTEN (may be nullptr: not needed), d_weight and d_bias
//                         ACCUMULATED (+=; either may be nullptr: frozen / no bias).
//   lora_linear_backward: d_x ACCUMULATED (+=) because it adds to the base linear's d_x;
//                         d_a and d_b ACCUMULATED (+=). d_x may be nullptr.
#pragma once

#include <cstdint>

namespace surogate::ops {

// bias may be nullptr.
template <typename T>
void linear_forward(const T* x, const T* weight, const T* bias, int64_t rows, int64_t in_features,
                    int64_t out_features, T* y);

// d_x = d_y · W ; d_weight += d_yᵀ · x ; d_bias += sum over rows of d_y.
template <typename T>
void linear_backward(const T* d_y, const T* x, const T* weight, int64_t rows, int64_t in_features,
                     int64_t out_features, T* d_x, T* d_weight, T* d_bias);

// y = x · Wᵀ + addend; y and addend do not alias.
template <typename T>
void linear_add_forward(const T* x, const T* weight, const T* addend, int64_t rows, int64_t in_features,
                        int64_t out_features, T* y);

// d_x = d_y · W + addend; d_x and addend do not alias.
template <typename T>
void linear_input_gradient_add(const T* d_y, const T* weight, const T* addend, int64_t rows, int64_t in_features,
                               int64_t out_features, T* d_x);

// y += scale · hidden · Bᵀ with hidden = x · Aᵀ (written to `hidden`, [rows, rank]).
template <typename T>
void lora_linear_forward(const T* x, const T* lora_a, const T* lora_b, int64_t rows,
                         int64_t in_features, int64_t rank, int64_t out_features, T scale,
                         T* hidden, T* y);

// d_b += scale · d_yᵀ · hidden ; d_hidden = scale · d_y · B ; d_a += d_hiddenᵀ · x ;
// d_x += d_hidden · A.
template <typename T>
void lora_linear_backward(const T* d_y, const T* x, const T* lora_a, const T* lora_b,
                          const T* hidden, int64_t rows, int64_t in_features, int64_t rank,
                          int64_t out_features, T scale, T* d_x, T* d_a, T* d_b);

}  // namespace surogate::ops
