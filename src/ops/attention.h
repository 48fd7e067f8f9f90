// Causal grouped-query scaled-dot-product attention, the reference for the flash-attention
// kernels. Layouts (row-major): q, out, d_q [B, T, Hq, D]; k, v, d_k, d_v [B, T, Hkv, D];
// logsumexp [B, Hq, T]. Hq must be a multiple of Hkv; query head h reads kv head
// h / (Hq / Hkv) (HF's repeat_kv order).
//
// Key j is visible from query i (same batch row) iff all of:
//   j ≤ i                                     (causal; skipped when causal is false: the
//                                              bidirectional attention of vision towers)
//   document_ids[b, j] == document_ids[b, i]  (packed sequences; skipped when nullptr)
//     and ≥ 0, or j == i                      (padding, id −1, sees only itself)
//   i − window < j                            (sliding window; skipped when window ≤ 0)
// The window rule is transformers' (masking_utils sliding_window_overlay and the older
// Mistral/Qwen2 4D masks): a query sees itself and the window − 1 tokens before it. A flash
// kernel expresses the same mask as window_size_left = window − 1, window_size_right = 0.
// document_ids [B, T] (int32) label each token with its document; documents must be
// contiguous runs within a row (document_ids_from_cu_seqlens builds them from cu_seqlens).
// Every query sees at least itself, so no softmax row is empty.
//
// Forward: s_ij = scale · q_i · k_j ; logsumexp_i = ln Σ_j exp(s_ij) (natural log of the
// scaled scores, the flash-attention convention) ; out_i = Σ_j exp(s_ij − logsumexp_i) v_j.
// Saved for backward: out and logsumexp.
// Backward (with p_ij = exp(s_ij − lse_i), Δ_i = d_out_i · out_i):
//   d_v_j = Σ_i p_ij d_out_i ; d_s_ij = p_ij (d_out_i · v_j − Δ_i) ;
//   d_q_i = scale Σ_j d_s_ij k_j ; d_k_j = scale Σ_i d_s_ij q_i
// with d_k / d_v summed over the query heads of each group. d_q, d_k, d_v are WRITTEN.
// Dot products and softmax sums accumulate in double; work is split over (batch, head).
#pragma once

#include <cstdint>
#include <vector>

namespace surogate::ops {

struct AttentionShape {
  int64_t batch = 0;
  int64_t sequence = 0;     // T
  int64_t query_heads = 0;  // Hq
  int64_t kv_heads = 0;     // Hkv
  int64_t head_dim = 0;     // D
  double scale = 0.0;       // softmax scale; 0 means 1 / sqrt(head_dim)
  int64_t window = 0;       // sliding window in tokens; 0 = full causal
  bool causal = true;       // false: every key of the document (no window then)
};

template <typename T>
void attention_forward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                       const int32_t* document_ids, T* out, T* logsumexp);

template <typename T>
void attention_backward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                        const int32_t* document_ids, const T* out, const T* logsumexp,
                        const T* d_out, T* d_q, T* d_k, T* d_v);

// cu_seqlens are flash-attention's cumulative document boundaries over the flattened B·T
// tokens: [0, len_0, len_0 + len_1, ..., B·T]. Documents may not cross a batch row. Returns
// one id per token (the document's index).
std::vector<int32_t> document_ids_from_cu_seqlens(const std::vector<int32_t>& cu_seqlens,
                                                  int64_t batch, int64_t sequence);

}  // namespace surogate::ops
