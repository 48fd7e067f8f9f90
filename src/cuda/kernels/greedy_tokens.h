// Generation's greedy choice on the GPU (ops/greedy_tokens.h is the CPU reference and the rule):
// per row of logits [rows, vocab], the first index of the largest value, or -1 when the row holds
// NaN or +inf. A cluster of blocks per row on sm_90 and later (one block per row before); only the
// ids leave the GPU. E: float, bf16 or fp16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename E>
void greedy_tokens(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream);

// One block per row on every GPU: the path before sm_90, also called by the bench and the tests to
// compare.
template <typename E>
void greedy_tokens_one_block(int32_t* tokens, const E* logits, int64_t rows, int64_t vocab, cudaStream_t stream);

}  // namespace surogate::cuda
