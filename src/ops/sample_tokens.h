// Generation's sampled choice of each row of logits, where the logits are: the CPU reference of
// the graph op "sample_tokens" (ops/defs/sample_tokens_def.cpp) and the oracle of its CUDA kernel
// (cuda/kernels/sample_tokens.h), which chooses the same tokens from the same fp32 logits.
// generate/sampling.h's options, in transformers' order, with core/token_draw.h's arithmetic:
//   0. a row holding NaN or +inf: kUnusableRow (-1), greedy_tokens' rule;
//   1. repetition_penalty: each distinct context id in [0, vocab) gets x < 0 ? x × p : x / p;
//   2. temperature 0: the first index of the largest value (greedy_tokens after the penalty; a row
//      of -inf gives 0). Otherwise x / temperature, then m = the largest; m = -inf: kNothingToDraw;
//   3. top_k (k in (0, vocab)): keep x >= the k-th largest value (ties kept);
//   4. weights W = sampling_weight(x − m) of the kept tokens (x = m: 2^40 exactly), T their sum;
//   5. top_p < 1: order the kept tokens by value descending, equal values higher id first; keep a
//      token while the weight of those before it is < L = max(1, uint64(double(top_p) × double(T)))
//      (the most likely always stays);
//   6. min_p: keep double(x) >= double(m) + double(log_min_p);
//   7. the draw: T' = the kept weights' sum, t = floor(token_draw_bits(seed, draw) × T' / 2^64),
//      the token = the first id (ascending) whose inclusive prefix sum of kept weights is > t:
//      inverse-CDF sampling over the kept set with integer probabilities.
// The weights quantise probabilities to 2^-40 of the most likely token's (rarer tokens are never
// drawn); top_p's cumulative sums and the draw are exact in those units.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/token_draw.h"
#include "ops/greedy_tokens.h"  // kUnusableRow

namespace surogate::ops {

inline constexpr int32_t kNothingToDraw = -2;  // a sampled row whose every value is -inf
inline constexpr int32_t kSkippedRow = -3;     // a row with temperature < 0 (nothing chosen)

// tokens[r] = row r's choice under params[r]. context: [rows, context_width] token ids (ids
// outside [0, vocab), e.g. -1 padding, are ignored), null when context_width is 0. vocab <=
// kMaxSampledVocab.
template <typename T>
void sample_tokens(const T* logits, int64_t rows, int64_t vocab, const RowSampling* params, const int32_t* context,
                   int64_t context_width, int32_t* tokens);

// Steps 3-6 for one row of processed values (after step 2's temperature, largest finite): each
// token's weight if kept, 0 if filtered. What the draw reads; exposed for the tests.
std::vector<uint64_t> kept_weights(std::span<const float> processed, const RowSampling& params);

}  // namespace surogate::ops
