// Two small reductions of the model ops: a bias's gradient (column sums of d_out) and the LM
// head's argmax hits (lm_head_accuracy). Plain host launchers on a stream; E is bf16 or fp16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// dbias[c] = Σ_rows dout[r, c] (fp32 sum in row order, one thread per column; deterministic).
template <typename E>
void bias_gradient(E* dbias, const E* dout, int64_t rows, int64_t columns, cudaStream_t stream);

// Per row of logits [rows, vocab] (E): hit when the first index of the row's maximum equals
// the label (labels outside [0, vocab), e.g. −100, are skipped). Adds the hits to *hits.
template <typename E>
void argmax_hits(int32_t* hits, const E* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                 cudaStream_t stream);
// out[0] = float(*count).
void count_to_float(const int32_t* count, float* out, cudaStream_t stream);

}  // namespace surogate::cuda
