// The greedy choice of each row of logits: generation's argmax (generate/sampling.h) where the
// logits are, so that a decode step copies back one id per row instead of the whole vocabulary.
// The CPU reference of the graph op "greedy_tokens" (ops/defs/greedy_tokens_def.cpp) and the
// oracle of its CUDA kernel (cuda/kernels/greedy_tokens.h).
#pragma once

#include <cstdint>

namespace surogate::ops {

// A row holding NaN or +inf: no token can be chosen (generate::TokenSampler refuses such logits).
inline constexpr int32_t kUnusableRow = -1;

// tokens[r] = the first index of the largest value of logits[r, :], or kUnusableRow when the row
// holds NaN or +inf. A row of -inf only gives 0 (its first index), as generate::argmax does.
template <typename T>
void greedy_tokens(const T* logits, int64_t rows, int64_t vocab, int32_t* tokens);

}  // namespace surogate::ops
