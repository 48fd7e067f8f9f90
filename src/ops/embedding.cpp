// Embedding lookup and scatter-add backward (see embedding.h). The backward runs serially in
// token order so repeated ids accumulate in a fixed order: the result is reproducible.
#include "ops/embedding.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::ops {

template <typename T>
void embedding_forward(const int32_t* ids, const T* table, int64_t tokens, int64_t vocab_size,
                       int64_t dim, T* out) {
  for (int64_t token = 0; token < tokens; ++token) {
    const int64_t id = ids[token];
    SUROGATE_CHECK(id >= 0 && id < vocab_size, "embedding id {} at token {} outside [0, {})", id,
                   token, vocab_size);
    std::copy_n(table + id * dim, dim, out + token * dim);
  }
}

template <typename T>
void embedding_backward(const int32_t* ids, const T* d_out, int64_t tokens, int64_t vocab_size,
                        int64_t dim, T* d_table) {
  for (int64_t token = 0; token < tokens; ++token) {
    const int64_t id = ids[token];
    SUROGATE_CHECK(id >= 0 && id < vocab_size, "embedding id {} at token {} outside [0, {})", id,
                   token, vocab_size);
    T* row = d_table + id * dim;
    const T* gradient = d_out + token * dim;
    for (int64_t column = 0; column < dim; ++column) row[column] += gradient[column];
  }
}

template void embedding_forward<float>(const int32_t*, const float*, int64_t, int64_t, int64_t,
                                       float*);
template void embedding_forward<double>(const int32_t*, const double*, int64_t, int64_t, int64_t,
                                        double*);
template void embedding_backward<float>(const int32_t*, const float*, int64_t, int64_t, int64_t,
                                        float*);
template void embedding_backward<double>(const int32_t*, const double*, int64_t, int64_t, int64_t,
                                         double*);

}  // namespace surogate::ops
