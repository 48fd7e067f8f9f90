// Attention of new tokens over a slot's cached keys and values: the decode-time form of
// ops/attention.h's causal GQA attention. The reference for the CUDA kernel.
//
// Layouts (row-major): q, out [B, T, Hq, D]; k, v [B, T, Hkv, D] (the new tokens' keys and values,
// after RoPE); k_cache, v_cache [N, S, Hkv, D] (N slots of S positions); slot_ids, cache_lengths,
// new_lengths I32 [B]. Row b of the batch is slot slot_ids[b], which holds L = cache_lengths[b]
// tokens; its first n = new_lengths[b] ≤ T new tokens are real, the rest padding.
//
// The op first APPENDS: k[b, t], v[b, t] for t < n are written to k_cache, v_cache at
// [slot_ids[b], L + t] (L + n ≤ S). Then query t < n, at absolute position p = L + t, sees the
// slot's keys j ≤ p, and with a sliding window (window > 0) only p − window < j (transformers'
// rule, as in attention.h). Outputs of padding queries (t ≥ n) are zero. Rows with n = 0 write
// nothing. Two rows may not name the same slot.
//
// Forward only (generation needs no gradient): s_j = scale · q · k_j ; out = Σ_j softmax(s)_j v_j,
// dot products and sums in double; work split over (row, query head).
#pragma once

#include <cstdint>

namespace surogate::ops {

struct CachedAttentionShape {
  int64_t batch = 0;        // B: rows of this call
  int64_t sequence = 0;     // T: new-token positions per row
  int64_t slots = 0;        // N
  int64_t capacity = 0;     // S: positions per slot
  int64_t query_heads = 0;  // Hq
  int64_t kv_heads = 0;     // Hkv
  int64_t head_dim = 0;     // D
  double scale = 0.0;       // softmax scale; 0 means 1 / sqrt(head_dim)
  int64_t window = 0;       // sliding window in tokens; 0 = full causal
};

// Throws UserError when a row's slot is outside [0, N), two rows share a slot, n is outside
// [0, T], L is negative, or L + n > S.
void check_cache_rows(const CachedAttentionShape& shape, const int32_t* slot_ids, const int32_t* cache_lengths,
                      const int32_t* new_lengths);

template <typename T>
void cached_attention_forward(const CachedAttentionShape& shape, const T* q, const T* k, const T* v, T* k_cache,
                              T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                              const int32_t* new_lengths, T* out);

}  // namespace surogate::ops
