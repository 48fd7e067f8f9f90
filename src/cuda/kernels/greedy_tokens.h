// Generation's greedy choice on the GPU (ops/greedy_tokens.h is the CPU reference and the rule):
// per row of logits [rows, vocab], the first index of the largest value, or -1 when the row holds
// NaN or +inf. One block per row; only the ids leave the GPU. E: float, bf16 or fp16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename E>
void greedy_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream);

}  // namespace surogate::cuda
