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

}  // namespace surogate::cuda
