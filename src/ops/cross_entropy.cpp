// Chunked LM-head cross-entropy forward/backward (see cross_entropy.h). Each chunk is one
// GEMM for its logits followed by a parallel pass over its rows (each row owned by one task).
#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/blas.h"
#include "ops/parallel_for.h"

namespace surogate::ops {
namespace {

void check_cross_entropy_shape(const CrossEntropyShape& shape) {
  SUROGATE_CHECK(shape.rows >= 0 && shape.hidden > 0 && shape.vocab > 0 && shape.chunks > 0,
                 "bad cross-entropy shape rows={} hidden={} vocab={} chunks={}", shape.rows,
                 shape.hidden, shape.vocab, shape.chunks);
}

int64_t rows_per_chunk(const CrossEntropyShape& shape) {
  return std::max<int64_t>(1, (shape.rows + shape.chunks - 1) / shape.chunks);
}

bool is_valid_label(const CrossEntropyShape& shape, int32_t label) {
  if (label == shape.ignore_index) return false;
  SUROGATE_CHECK(label >= 0 && label < shape.vocab, "label {} outside [0, {})", label, shape.vocab);
  return true;
}

template <typename T>
double row_logsumexp(const T* logits, int64_t vocab) {
  double maximum = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < vocab; ++v) maximum = std::max(maximum, static_cast<double>(logits[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - maximum);
  return maximum + std::log(sum);
}

}  // namespace

template <typename T>
void lm_head_logits(const T* hidden, const T* weight, int64_t rows, int64_t hidden_dim,
                    int64_t vocab, T* logits) {
  detail::gemm(false, true, rows, vocab, hidden_dim, T(1), hidden, hidden_dim, weight, hidden_dim,
               T(0), logits, vocab);
}

template <typename T>
CrossEntropyResult lm_head_cross_entropy_forward(const CrossEntropyShape& shape, const T* hidden,
                                                 const T* weight, const int32_t* labels,
                                                 T* logsumexp, const float* token_weights) {
  check_cross_entropy_shape(shape);
  const int64_t chunk_rows = rows_per_chunk(shape), vocab = shape.vocab, dim = shape.hidden;
  std::vector<T> logits(static_cast<size_t>(chunk_rows * vocab));
  std::vector<double> row_loss(static_cast<size_t>(chunk_rows));
  CrossEntropyResult result;
  for (int64_t begin = 0; begin < shape.rows; begin += chunk_rows) {
    const int64_t count = std::min(chunk_rows, shape.rows - begin);
    lm_head_logits(hidden + begin * dim, weight, count, dim, vocab, logits.data());
    parallel_for(count, [&](int64_t local) {
      const T* row = logits.data() + local * vocab;
      const double normalizer = row_logsumexp(row, vocab);
      logsumexp[begin + local] = static_cast<T>(normalizer);
      const int32_t label = labels[begin + local];
      const double token_weight = token_weights != nullptr ? token_weights[begin + local] : 1.0;
      row_loss[local] = is_valid_label(shape, label) ? token_weight * (normalizer - row[label]) : 0.0;
    });
    for (int64_t local = 0; local < count; ++local) {
      if (labels[begin + local] == shape.ignore_index) continue;
      result.loss_sum += row_loss[local];
      ++result.valid_tokens;
    }
  }
  return result;
}

template <typename T>
void lm_head_cross_entropy_backward(const CrossEntropyShape& shape, const T* hidden,
                                    const T* weight, const int32_t* labels, const T* logsumexp,
                                    T d_loss_sum, T* d_hidden, T* d_weight,
                                    const float* token_weights) {
  check_cross_entropy_shape(shape);
  const int64_t chunk_rows = rows_per_chunk(shape), vocab = shape.vocab, dim = shape.hidden;
  std::vector<T> logits(static_cast<size_t>(chunk_rows * vocab));
  for (int64_t begin = 0; begin < shape.rows; begin += chunk_rows) {
    const int64_t count = std::min(chunk_rows, shape.rows - begin);
    const T* hidden_chunk = hidden + begin * dim;
    lm_head_logits(hidden_chunk, weight, count, dim, vocab, logits.data());
    // Logits become their gradient in place.
    parallel_for(count, [&](int64_t local) {
      T* row = logits.data() + local * vocab;
      const int32_t label = labels[begin + local];
      if (!is_valid_label(shape, label)) {
        std::fill(row, row + vocab, T(0));
        return;
      }
      const double normalizer = logsumexp[begin + local];
      const double scale = static_cast<double>(d_loss_sum) *
                           (token_weights != nullptr ? static_cast<double>(token_weights[begin + local]) : 1.0);
      for (int64_t v = 0; v < vocab; ++v) {
        const double probability = std::exp(static_cast<double>(row[v]) - normalizer);
        row[v] = static_cast<T>(scale * (probability - (v == label ? 1.0 : 0.0)));
      }
    });
    detail::gemm(false, false, count, dim, vocab, T(1), logits.data(), vocab, weight, dim, T(0),
                 d_hidden + begin * dim, dim);
    if (d_weight != nullptr) {
      detail::gemm(true, false, vocab, dim, count, T(1), logits.data(), vocab, hidden_chunk, dim,
                   T(1), d_weight, dim);
    }
  }
}

#define SUROGATE_INSTANTIATE_CROSS_ENTROPY(T)                                                      \
  template CrossEntropyResult lm_head_cross_entropy_forward<T>(const CrossEntropyShape&, const T*, \
                                                               const T*, const int32_t*, T*,       \
                                                               const float*);                      \
  template void lm_head_cross_entropy_backward<T>(const CrossEntropyShape&, const T*, const T*,    \
                                                  const int32_t*, const T*, T, T*, T*,             \
                                                  const float*);                                   \
  template void lm_head_logits<T>(const T*, const T*, int64_t, int64_t, int64_t, T*);
SUROGATE_INSTANTIATE_CROSS_ENTROPY(float)
SUROGATE_INSTANTIATE_CROSS_ENTROPY(double)
#undef SUROGATE_INSTANTIATE_CROSS_ENTROPY

}  // namespace surogate::ops
