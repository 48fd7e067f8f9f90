// The element-wise and per-row parts of a NorMuon step (the device twin of
// train/optim/normuon.cpp; the orthogonalisation between them is cuda/newton_schulz.h), for a
// group of hidden matrices W [rows, cols] of one shape updated together (a LoRA model has
// hundreds of small ones; one launch per part for the whole group):
//   normuon_momentum:       M = μ M + (1−μ) g,  U = μ M + (1−μ) g     (g = grad · grad_scale)
//   normuon_normalize_rows: s_i = β2 s_i + (1−β2) mean_j O_ij²;  O_ij /= sqrt(s_i) + ε;
//                           norms[k] = Σ O_ij² of matrix k (after scaling)
//   normuon_apply:          u = O · 0.2 sqrt(rows·cols) / (sqrt(norms[k]) + ε)
//                           W −= lr (u + wd · [!cautious or u·W > 0] · W);  params = bf16(W)
// U / O is the group's stacked direction [matrices, rows, cols]; everything else is reached
// through per-matrix device pointer tables.
// Precision options: the gradients are fp32 (grad) or bf16 (grad_bf16, gradient_dtype bf16);
// with a bf16 master (master null, master_dtype bf16) W is read from params and written back
// stochastically rounded with rounding_parameter_key(rounding_step_key, parameter_index[k])
// (core/stochastic_rounding.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

constexpr float kNorMuonEpsilon = 1e-8f;

struct NorMuonGroup {
  int64_t matrices = 0, rows = 0, cols = 0;
  float* const* momentum = nullptr;       // [matrices] → [rows, cols]
  const float* const* grad = nullptr;     // [matrices] → [rows, cols]
  float* const* second_moment = nullptr;  // [matrices] → [rows]
  float* const* master = nullptr;         // [matrices] → [rows, cols]; null: params are the master
  __nv_bfloat16* const* params = nullptr; // [matrices] → [rows, cols] (entries may be null with a master)
  const int* decays = nullptr;            // [matrices]: 0 = no weight decay
  float* update = nullptr;                // [matrices, rows, cols]
  double* norms = nullptr;                // [matrices]
  const __nv_bfloat16* const* grad_bf16 = nullptr;  // [matrices] → [rows, cols], instead of grad
  const uint32_t* parameter_index = nullptr;        // [matrices]: for the rounding key (bf16 master)
};

void normuon_momentum(const NorMuonGroup& group, const float* grad_scale, float mu, cudaStream_t stream);
void normuon_normalize_rows(const NorMuonGroup& group, float beta2, cudaStream_t stream);
void normuon_apply(const NorMuonGroup& group, float learning_rate, float decay, bool cautious,
                   uint64_t rounding_step_key, cudaStream_t stream);

// For each of `matrices` stacked matrices of `count` values: Σ x² into sums[k] (zeroed here),
// then x *= 1 / (sqrt(sums[k]) + 1e-7): the Frobenius normalisation that starts Newton–Schulz.
void frobenius_normalize(float* x, int64_t matrices, int64_t count, double* sums, cudaStream_t stream);

}  // namespace surogate::cuda
