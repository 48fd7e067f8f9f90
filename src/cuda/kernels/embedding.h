// Token embedding lookup.
//   forward:  out[t, :] = table[ids[t], :]                 (bf16 [tokens, C] from bf16 [V, C])
//   backward: dtable[ids[t], :] += dout[t, :]              (fp32 [V, C], accumulated)
// One thread moves one 16-byte vector (8 channels); C must be a multiple of 8. An id outside
// [0, V) reads nothing: forward writes zeros for it and backward skips it (ids are validated
// by the data pipeline; this only keeps a bad id from reading out of bounds).
// The backward uses fp32 atomics (red.global.add) into dtable, so it is NOT bitwise
// deterministic when a token id repeats in a batch; its rounding differences are at fp32 level.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t tokens,
                       int64_t vocab, int64_t channels, cudaStream_t stream);

template <typename T>
void embedding_backward(float* dtable, const int32_t* ids, const T* dout, int64_t tokens, int64_t vocab,
                        int64_t channels, cudaStream_t stream);

// The whole 16-bit gradient dtable [V, C] of one batch: zeros, and the rows the ids touch summed
// in fp32 (embedding_backward into those rows of rows_scratch, fp32 [V, C], which only they are
// zeroed in and read from) and rounded once. The same values as zeroing an fp32 table, the
// scatter-add and converting the whole table, without the two passes over [V, C] in fp32 (a
// 151,936 × 2,048 table: 1.2 GB zeroed and read each micro-batch).
template <typename T>
void embedding_backward_rows(T* dtable, float* rows_scratch, const int32_t* ids, const T* dout, int64_t tokens,
                             int64_t vocab, int64_t channels, cudaStream_t stream);

}  // namespace surogate::cuda
