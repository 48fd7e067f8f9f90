// Reference attention over a KV cache (see cached_attention.h): append, then a plain softmax per
// (row, query head), in double. Each parallel task owns its output rows and, for the append, the
// whole row, so results do not depend on the thread count.
#include "ops/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::ops {

void check_cache_rows(const CachedAttentionShape& shape, const int32_t* slot_ids, const int32_t* cache_lengths,
                      const int32_t* new_lengths) {
  std::vector<bool> taken(static_cast<size_t>(std::max<int64_t>(shape.slots, 0)), false);
  for (int64_t row = 0; row < shape.batch; ++row) {
    const int64_t slot = slot_ids[row], held = cache_lengths[row], fresh = new_lengths[row];
    if (slot < 0 || slot >= shape.slots) fail_user("cached_attention: row {} names slot {}, outside [0, {})", row, slot, shape.slots);
    if (taken[static_cast<size_t>(slot)]) fail_user("cached_attention: slot {} is named by two rows", slot);
    taken[static_cast<size_t>(slot)] = true;
    if (fresh < 0 || fresh > shape.sequence) {
      fail_user("cached_attention: row {} has {} new tokens, outside [0, {}]", row, fresh, shape.sequence);
    }
    if (held < 0 || held + fresh > shape.capacity) {
      fail_user("cached_attention: row {} would hold {} + {} tokens in a slot of {}", row, held, fresh, shape.capacity);
    }
  }
}

template <typename T>
void cached_attention_forward(const CachedAttentionShape& shape, const T* q, const T* k, const T* v, T* k_cache,
                              T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                              const int32_t* new_lengths, T* out) {
  SUROGATE_CHECK(shape.batch > 0 && shape.sequence > 0 && shape.head_dim > 0 && shape.kv_heads > 0 &&
                     shape.query_heads % shape.kv_heads == 0,
                 "cached_attention: bad shape");
  check_cache_rows(shape, slot_ids, cache_lengths, new_lengths);
  const int64_t sequence = shape.sequence, dim = shape.head_dim, capacity = shape.capacity;
  const int64_t query_heads = shape.query_heads, kv_heads = shape.kv_heads, group = query_heads / kv_heads;
  const int64_t kv_row = kv_heads * dim;  // elements of one position's keys
  const double scale = shape.scale != 0.0 ? shape.scale : 1.0 / std::sqrt(static_cast<double>(dim));

  parallel_for(shape.batch, [&](int64_t row) {
    const int64_t slot_base = static_cast<int64_t>(slot_ids[row]) * capacity;
    const int64_t held = cache_lengths[row];
    for (int64_t t = 0; t < new_lengths[row]; ++t) {
      const int64_t from = (row * sequence + t) * kv_row, to = (slot_base + held + t) * kv_row;
      std::copy(k + from, k + from + kv_row, k_cache + to);
      std::copy(v + from, v + from + kv_row, v_cache + to);
    }
  });
  parallel_for(shape.batch * query_heads, [&](int64_t task) {
    const int64_t row = task / query_heads, head = task % query_heads, kv_head = head / group;
    const int64_t slot_base = static_cast<int64_t>(slot_ids[row]) * capacity;
    const int64_t held = cache_lengths[row], fresh = new_lengths[row];
    std::vector<double> scores(static_cast<size_t>(held + fresh));
    std::vector<double> accumulator(static_cast<size_t>(dim));
    for (int64_t t = 0; t < sequence; ++t) {
      T* out_row = out + ((row * sequence + t) * query_heads + head) * dim;
      if (t >= fresh) {
        std::fill(out_row, out_row + dim, T(0));
        continue;
      }
      const T* query_row = q + ((row * sequence + t) * query_heads + head) * dim;
      const int64_t position = held + t;
      const int64_t first = shape.window > 0 ? std::max<int64_t>(0, position - shape.window + 1) : 0;
      double maximum = -std::numeric_limits<double>::infinity();
      for (int64_t key = first; key <= position; ++key) {
        const T* key_row = k_cache + (slot_base + key) * kv_row + kv_head * dim;
        double dot = 0.0;
        for (int64_t i = 0; i < dim; ++i) dot += static_cast<double>(query_row[i]) * static_cast<double>(key_row[i]);
        scores[static_cast<size_t>(key)] = scale * dot;
        maximum = std::max(maximum, scores[static_cast<size_t>(key)]);
      }
      double sum = 0.0;
      for (int64_t key = first; key <= position; ++key) sum += std::exp(scores[static_cast<size_t>(key)] - maximum);
      std::fill(accumulator.begin(), accumulator.end(), 0.0);
      for (int64_t key = first; key <= position; ++key) {
        const double probability = std::exp(scores[static_cast<size_t>(key)] - maximum) / sum;
        const T* value_row = v_cache + (slot_base + key) * kv_row + kv_head * dim;
        for (int64_t i = 0; i < dim; ++i) accumulator[static_cast<size_t>(i)] += probability * static_cast<double>(value_row[i]);
      }
      for (int64_t i = 0; i < dim; ++i) out_row[i] = static_cast<T>(accumulator[static_cast<size_t>(i)]);
    }
  });
}

#define SUROGATE_INSTANTIATE_CACHED_ATTENTION(T)                                                                  \
  template void cached_attention_forward<T>(const CachedAttentionShape&, const T*, const T*, const T*, T*, T*,   \
                                            const int32_t*, const int32_t*, const int32_t*, T*);
SUROGATE_INSTANTIATE_CACHED_ATTENTION(float)
SUROGATE_INSTANTIATE_CACHED_ATTENTION(double)
#undef SUROGATE_INSTANTIATE_CACHED_ATTENTION

}  // namespace surogate::ops
