// The element-wise and per-row parts of a NorMuon step on one hidden matrix W [rows, cols]
// (the device twin of train/optim/normuon.cpp; the orthogonalisation between them is
// cuda/newton_schulz.h):
//   normuon_momentum:      M = μ M + (1−μ) g,  U = μ M + (1−μ) g     (g = grad · grad_scale)
//   normuon_normalize_rows: s_i = β2 s_i + (1−β2) mean_j O_ij²;  O_ij /= sqrt(s_i) + ε;
//                          norm_squared += Σ O_ij²  (after scaling; norm_squared is zeroed first)
//   normuon_apply:         u = O · 0.2 sqrt(rows·cols) / (sqrt(norm_squared) + ε)
//                          W −= lr (u + wd · [!cautious or u·W > 0] · W);  params = bf16(W)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

constexpr float kNorMuonEpsilon = 1e-8f;

void normuon_momentum(float* momentum, float* update, const float* grad, const float* grad_scale, int64_t count,
                      float mu, cudaStream_t stream);

// `norm_squared` is one double on the device; this zeroes it, then accumulates into it.
void normuon_normalize_rows(float* update, float* second_moment, int64_t rows, int64_t cols, float beta2,
                            double* norm_squared, cudaStream_t stream);

void normuon_apply(__nv_bfloat16* params, float* master, const float* update, int64_t rows, int64_t cols,
                   const double* norm_squared, float learning_rate, float decay, bool cautious, cudaStream_t stream);

// Σ x² into `sum` (one double, zeroed here), then x *= 1 / (sqrt(sum) + 1e-7): the Frobenius
// normalisation that starts Newton–Schulz.
void frobenius_normalize(float* x, int64_t count, double* sum, cudaStream_t stream);

}  // namespace surogate::cuda
