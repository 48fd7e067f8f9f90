// Generation's sampled choice on the GPU (ops/sample_tokens.h is the CPU reference and the rule;
// core/token_draw.h the arithmetic both share): per row of logits [rows, vocab] with its
// RowSampling, the token the CPU op chooses from the same fp32 values, or its negative codes
// (-1 NaN / +inf, -2 nothing to draw, -3 skipped). One block per row; only the ids leave the GPU.
// E: float, bf16 or fp16. params, context and tokens are device pointers; context [rows,
// context_width] (ids outside [0, vocab) ignored) may be null when context_width is 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/token_draw.h"

namespace surogate::cuda {

template <typename E>
void sample_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, const RowSampling* params,
                   const int32_t* context, int64_t context_width, cudaStream_t stream);

}  // namespace surogate::cuda
