// Reference causal GQA attention with document masking and sliding window (see attention.h).
// O(T²) per head, by design: it is the readable oracle, not a fast path. Each parallel task
// owns complete output rows (forward: one (batch, query head); backward: one (batch, kv head)
// with all query heads of its group), so results do not depend on the thread count.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::ops {
namespace {

double resolved_scale(const AttentionShape& shape) {
  return shape.scale != 0.0 ? shape.scale : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
}

void check_attention_shape(const AttentionShape& shape) {
  SUROGATE_CHECK(shape.batch > 0 && shape.sequence > 0 && shape.head_dim > 0,
                 "attention needs positive batch, sequence and head_dim");
  SUROGATE_CHECK(shape.kv_heads > 0 && shape.query_heads % shape.kv_heads == 0,
                 "query heads {} must be a multiple of kv heads {}", shape.query_heads,
                 shape.kv_heads);
  SUROGATE_CHECK(shape.causal || shape.window == 0, "a sliding window needs causal attention");
}

// First key index visible from query i under the window rule (documents are checked apart).
int64_t first_visible_key(const AttentionShape& shape, int64_t query) {
  return shape.window > 0 ? std::max<int64_t>(0, query - shape.window + 1) : 0;
}

// Last key index visible from query i: itself when causal, else the row's last token.
int64_t last_visible_key(const AttentionShape& shape, int64_t query) {
  return shape.causal ? query : shape.sequence - 1;
}

// Padding (document id −1) sees only itself: a padding run is no document, and letting it attend
// across its length would cost the square of the run (a long context's last row of an epoch).
bool same_document(const int32_t* row_documents, int64_t query, int64_t key) {
  if (row_documents == nullptr || key == query) return true;
  return row_documents[query] >= 0 && row_documents[key] == row_documents[query];
}

template <typename T>
double dot(const T* a, const T* b, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

}  // namespace

template <typename T>
void attention_forward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                       const int32_t* document_ids, T* out, T* logsumexp) {
  check_attention_shape(shape);
  const int64_t sequence = shape.sequence, dim = shape.head_dim;
  const int64_t query_heads = shape.query_heads, kv_heads = shape.kv_heads;
  const int64_t group = query_heads / kv_heads;
  const double scale = resolved_scale(shape);

  parallel_for(shape.batch * query_heads, [&](int64_t task) {
    const int64_t batch = task / query_heads, head = task % query_heads;
    const int64_t kv_head = head / group;
    const int32_t* row_documents =
        document_ids == nullptr ? nullptr : document_ids + batch * sequence;
    std::vector<double> scores(static_cast<size_t>(sequence));
    std::vector<double> accumulator(static_cast<size_t>(dim));
    for (int64_t query = 0; query < sequence; ++query) {
      const T* query_row = q + ((batch * sequence + query) * query_heads + head) * dim;
      const int64_t first = first_visible_key(shape, query), last = last_visible_key(shape, query);
      double maximum = -std::numeric_limits<double>::infinity();
      for (int64_t key = first; key <= last; ++key) {
        if (!same_document(row_documents, query, key)) continue;
        const T* key_row = k + ((batch * sequence + key) * kv_heads + kv_head) * dim;
        scores[key] = scale * dot(query_row, key_row, dim);
        maximum = std::max(maximum, scores[key]);
      }
      double sum = 0.0;
      for (int64_t key = first; key <= last; ++key) {
        if (same_document(row_documents, query, key)) sum += std::exp(scores[key] - maximum);
      }
      const double log_normalizer = maximum + std::log(sum);
      std::fill(accumulator.begin(), accumulator.end(), 0.0);
      for (int64_t key = first; key <= last; ++key) {
        if (!same_document(row_documents, query, key)) continue;
        const double probability = std::exp(scores[key] - log_normalizer);
        const T* value_row = v + ((batch * sequence + key) * kv_heads + kv_head) * dim;
        for (int64_t d = 0; d < dim; ++d) accumulator[d] += probability * value_row[d];
      }
      T* output = out + ((batch * sequence + query) * query_heads + head) * dim;
      for (int64_t d = 0; d < dim; ++d) output[d] = static_cast<T>(accumulator[d]);
      logsumexp[(batch * query_heads + head) * sequence + query] = static_cast<T>(log_normalizer);
    }
  });
}

template <typename T>
void attention_backward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                        const int32_t* document_ids, const T* out, const T* logsumexp,
                        const T* d_out, T* d_q, T* d_k, T* d_v) {
  check_attention_shape(shape);
  const int64_t sequence = shape.sequence, dim = shape.head_dim;
  const int64_t query_heads = shape.query_heads, kv_heads = shape.kv_heads;
  const int64_t group = query_heads / kv_heads;
  const double scale = resolved_scale(shape);

  parallel_for(shape.batch * kv_heads, [&](int64_t task) {
    const int64_t batch = task / kv_heads, kv_head = task % kv_heads;
    const int32_t* row_documents =
        document_ids == nullptr ? nullptr : document_ids + batch * sequence;
    auto kv_offset = [&](int64_t token) {
      return ((batch * sequence + token) * kv_heads + kv_head) * dim;
    };
    std::vector<double> key_gradient(static_cast<size_t>(sequence * dim), 0.0);
    std::vector<double> value_gradient(static_cast<size_t>(sequence * dim), 0.0);
    std::vector<double> query_gradient(static_cast<size_t>(dim));
    for (int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
      for (int64_t query = 0; query < sequence; ++query) {
        const int64_t q_offset = ((batch * sequence + query) * query_heads + head) * dim;
        const T* query_row = q + q_offset;
        const T* output_gradient = d_out + q_offset;
        const double delta = dot(output_gradient, out + q_offset, dim);
        const double log_normalizer = logsumexp[(batch * query_heads + head) * sequence + query];
        std::fill(query_gradient.begin(), query_gradient.end(), 0.0);
        const int64_t last = last_visible_key(shape, query);
        for (int64_t key = first_visible_key(shape, query); key <= last; ++key) {
          if (!same_document(row_documents, query, key)) continue;
          const T* key_row = k + kv_offset(key);
          const T* value_row = v + kv_offset(key);
          const double probability =
              std::exp(scale * dot(query_row, key_row, dim) - log_normalizer);
          const double score_gradient =
              probability * (dot(output_gradient, value_row, dim) - delta);
          double* key_accumulator = key_gradient.data() + key * dim;
          double* value_accumulator = value_gradient.data() + key * dim;
          for (int64_t d = 0; d < dim; ++d) {
            value_accumulator[d] += probability * output_gradient[d];
            query_gradient[d] += scale * score_gradient * key_row[d];
            key_accumulator[d] += scale * score_gradient * query_row[d];
          }
        }
        for (int64_t d = 0; d < dim; ++d) d_q[q_offset + d] = static_cast<T>(query_gradient[d]);
      }
    }
    for (int64_t token = 0; token < sequence; ++token) {
      for (int64_t d = 0; d < dim; ++d) {
        d_k[kv_offset(token) + d] = static_cast<T>(key_gradient[token * dim + d]);
        d_v[kv_offset(token) + d] = static_cast<T>(value_gradient[token * dim + d]);
      }
    }
  });
}

std::vector<int32_t> document_ids_from_cu_seqlens(const std::vector<int32_t>& cu_seqlens,
                                                  int64_t batch, int64_t sequence) {
  const int64_t total = batch * sequence;
  SUROGATE_CHECK(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0 && cu_seqlens.back() == total,
                 "cu_seqlens must run from 0 to B·T = {}", total);
  std::vector<int32_t> documents(static_cast<size_t>(total));
  for (size_t document = 0; document + 1 < cu_seqlens.size(); ++document) {
    const int64_t begin = cu_seqlens[document], end = cu_seqlens[document + 1];
    SUROGATE_CHECK(begin < end, "cu_seqlens must increase strictly (document {})", document);
    SUROGATE_CHECK(begin / sequence == (end - 1) / sequence,
                   "document {} [{}, {}) crosses a batch row of {} tokens", document, begin, end,
                   sequence);
    std::fill(documents.begin() + begin, documents.begin() + end, static_cast<int32_t>(document));
  }
  return documents;
}

#define SUROGATE_INSTANTIATE_ATTENTION(T)                                                  \
  template void attention_forward<T>(const AttentionShape&, const T*, const T*, const T*,  \
                                     const int32_t*, T*, T*);                              \
  template void attention_backward<T>(const AttentionShape&, const T*, const T*, const T*, \
                                      const int32_t*, const T*, const T*, const T*, T*, T*, T*);
SUROGATE_INSTANTIATE_ATTENTION(float)
SUROGATE_INSTANTIATE_ATTENTION(double)
#undef SUROGATE_INSTANTIATE_ATTENTION

}  // namespace surogate::ops
