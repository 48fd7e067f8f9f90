// LM head + token cross-entropy, chunked over rows so that at most ceil(N / chunks) × V
// logits exist at once (the vocabulary projection is the largest activation of a step).
//
// Inputs: hidden [N, D], weight [V, D] (the lm_head, or the embedding table when tied),
// labels int32 [N]. labels[n] is ALREADY the target for position n: the next-token shift
// (labels[n] = input_ids[n + 1], −100 at document ends and on masked prompt tokens) happens
// once, upstream, in the data pipeline / model builder. This op never shifts.
// Rows whose label equals ignore_index (−100) contribute no loss and no gradient.
//
// Forward: logits = hidden · weightᵀ ; lse_n = ln Σ_v exp(logits[n, v]) ;
//   loss_sum = Σ_{valid n} (lse_n − logits[n, label_n]) ; valid_tokens = #valid rows.
// The mean loss HF reports is loss_sum / valid_tokens. Saved for backward: logsumexp [N].
// Backward (logits recomputed per chunk), for a scalar upstream gradient d_loss_sum
// (1 / valid_tokens for the mean):
//   d_logits[n, v] = d_loss_sum · (softmax(logits[n])_v − [v == label_n]) for valid n, else 0
//   d_hidden = d_logits · weight        (WRITTEN)
//   d_weight += d_logitsᵀ · hidden      (ACCUMULATED; nullptr when the head is frozen)
// Per-row losses are summed in row order in double, so loss_sum does not depend on `chunks`.
// Token weights (loss_scale strategies that weigh parts of a response): `token_weights` [N], or
// null for all 1 (read only when given, so the unweighted path does no extra work). Row n then
// contributes w_n · (lse_n − logits[n, label_n]) to loss_sum and its gradient is scaled by w_n;
// valid_tokens still counts rows. The weighted mean is loss_sum / Σ w over valid rows, which the
// trainer's scale input divides by.
#pragma once

#include <cstdint>

namespace surogate::ops {

inline constexpr int32_t kIgnoreIndex = -100;

struct CrossEntropyShape {
  int64_t rows = 0;    // N
  int64_t hidden = 0;  // D
  int64_t vocab = 0;   // V
  int64_t chunks = 1;  // row slices processed one after the other
  int32_t ignore_index = kIgnoreIndex;
};

struct CrossEntropyResult {
  double loss_sum = 0.0;
  int64_t valid_tokens = 0;
};

template <typename T>
CrossEntropyResult lm_head_cross_entropy_forward(const CrossEntropyShape& shape, const T* hidden,
                                                 const T* weight, const int32_t* labels,
                                                 T* logsumexp, const float* token_weights = nullptr);

template <typename T>
void lm_head_cross_entropy_backward(const CrossEntropyShape& shape, const T* hidden,
                                    const T* weight, const int32_t* labels, const T* logsumexp,
                                    T d_loss_sum, T* d_hidden, T* d_weight,
                                    const float* token_weights = nullptr);

// Full logits [N, V] = hidden · weightᵀ, for parity tests against HF.
template <typename T>
void lm_head_logits(const T* hidden, const T* weight, int64_t rows, int64_t hidden_dim,
                    int64_t vocab, T* logits);

}  // namespace surogate::ops
