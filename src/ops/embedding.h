// Token embedding lookup: out[n, :] = table[ids[n], :]. The backward is a scatter-add into
// the table gradient, because the same token id may occur many times in a batch.
//
// Layouts: ids int32 [N], table [V, D], out / d_out [N, D], d_table [V, D] (all row-major).
// Gradient semantics: embedding_backward ACCUMULATES (+=) into d_table.
// Ids are validated by the data pipeline; an id outside [0, V) here is an engine bug and
// raises InternalError (SUROGATE_CHECK).
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void embedding_forward(const int32_t* ids, const T* table, int64_t tokens, int64_t vocab_size,
                       int64_t dim, T* out);

template <typename T>
void embedding_backward(const int32_t* ids, const T* d_out, int64_t tokens, int64_t vocab_size,
                        int64_t dim, T* d_table);

}  // namespace surogate::ops
