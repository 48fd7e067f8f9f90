// Per-sequence log-probabilities of completion tokens through the LM head: what preference losses
// (DPO, IPO, SimPO, ORPO, KTO) are written over. The CPU reference; the CUDA path runs the chunked
// LM-head kernel (cuda/lm_head_loss.h) for the per-row losses and its weighted backward.
//
// Inputs: hidden [N, D], weight [V, D] (the LM head), targets int32 [N] (already shifted, −100 where
// nothing is scored, as ops/cross_entropy.h), sequence_ids int32 [N]: the sequence row n's target
// belongs to, in [0, S), or −1 for none.
// Forward, over the rows n with sequence_ids[n] = s ≥ 0 and a target:
//   logps[s]      = Σ_n (logits[n, target_n] − lse_n)           (summed completion log-probs)
//   logit_sums[s] = Σ_n (1/V) Σ_v logits[n, v]                  (TRL's logits/chosen numerator)
//   logsumexp[n]  saved for the backward (0 where not scored).
// Backward, for d_logps [S]:
//   d_logits[n, v] = d_logps[s] · ([v == target_n] − softmax(logits[n])_v) on scored rows, else 0
//   d_hidden = d_logits · weight (WRITTEN) ; d_weight += d_logitsᵀ · hidden (ACCUMULATED, may be null)
// Sums run in double in row order, so results do not depend on threading.
#pragma once

#include <cstdint>

namespace surogate::ops {

struct SequenceLogpsShape {
  int64_t rows = 0;       // N
  int64_t hidden = 0;     // D
  int64_t vocab = 0;      // V
  int64_t sequences = 0;  // S
  int32_t ignore_index = -100;
};

// Whether row n is scored: a sequence id in range and a target that is not ignore_index (a
// sequence id out of [−1, S) is a SUROGATE_CHECK failure: the trainer builds them).
bool scored_row(const SequenceLogpsShape& shape, const int32_t* targets, const int32_t* sequence_ids, int64_t row);

template <typename T>
void sequence_logps_forward(const SequenceLogpsShape& shape, const T* hidden, const T* weight, const int32_t* targets,
                            const int32_t* sequence_ids, T* logps, T* logit_sums, T* logsumexp);

template <typename T>
void sequence_logps_backward(const SequenceLogpsShape& shape, const T* hidden, const T* weight, const int32_t* targets,
                             const int32_t* sequence_ids, const T* logsumexp, const T* d_logps, T* d_hidden,
                             T* d_weight);

}  // namespace surogate::ops
