// The preference-tuning kernels (the graph ops sequence_logps and preference_loss,
// ops/preference_logps.h and ops/preference_loss.h hold the formulas and the CPU reference):
// per-sequence sums of the LM head's per-row losses, the per-row weights its backward runs with,
// the mean-logit sums TRL logs, and the loss itself. Sequence counts are a micro-batch's (tiny):
// one block per sequence, fixed-order reductions, no float atomics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// logps[s] = −Σ row_losses[n] over rows with sequence_ids[n] == s and a target in [0, vocab).
void sequence_logps_from_row_losses(const float* row_losses, const int32_t* targets, const int32_t* sequence_ids,
                                    int64_t rows, int64_t vocab, int64_t sequences, float* logps, cudaStream_t stream);

// weights[n] = −d_logps[sequence_ids[n]] (0 for −1), and *one = 1 (the backward's grad_scale).
void sequence_token_weights(const float* d_logps, const int32_t* sequence_ids, int64_t rows, float* weights,
                            float* one, cudaStream_t stream);

// logit_sums[s] = Σ over the rows of s of mean_v (hidden[n] · weight[v]) = hidden[n] · column_means;
// column_means [channels] is scratch.
template <typename E>
void sequence_logit_sums(const E* hidden, const E* weight, const int32_t* targets, const int32_t* sequence_ids,
                         int64_t rows, int64_t channels, int64_t vocab, int64_t sequences, float* column_means,
                         float* logit_sums, cudaStream_t stream);

// ops::PreferenceLossOptions as the kernel reads it (type: 0 dpo, 1 ipo, 2 simpo, 3 orpo, 4 kto).
struct PreferenceLossParams {
  int type = 0;
  double beta = 0.1, label_smoothing = 0.0, target_margin = 0.0, simpo_gamma = 0.5, orpo_beta = 0.1;
  double desirable_weight = 1.0, undesirable_weight = 1.0;
  bool length_norm = false, reference_free = false;
};

// loss[0] (forward) or d_logps [2P] (backward, d_loss given): the CPU reference's formulas in double.
void preference_loss(const PreferenceLossParams& params, int64_t pairs, const float* logps, const float* reference_logps,
                     const float* lengths, const float* labels, const float* scales, const float* d_loss, float* loss,
                     float* d_logps, cudaStream_t stream);

}  // namespace surogate::cuda
