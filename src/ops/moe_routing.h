// Mixture-of-experts routing, the CPU reference (fp32 / fp64) of the MoE graph ops: the router's
// softmax top-k, the token → expert sort, the permutation of token rows into expert order and
// back (weighted by the router), and the statistics of transformers' load-balancing loss.
// N tokens, E experts, k experts per token, M = N·k assignments; assignment a = t·k + j is
// token t's j-th choice. Layouts are row-major.
//
//   router_topk:        probs = softmax(logits) [N, E] (max-subtracted, as torch);
//                       indices [N, k] = the k largest probs per row, largest first (ties: lower
//                       expert first); weights [N, k] = those probs, divided by their sum when
//                       `normalize` (Qwen norm_topk_prob, Mixtral always).
//   router_topk_backward: with s_j = probs[t, i_j], S = Σ s_j:
//                       dL/ds_j = normalize ? (dw_j − Σ_m dw_m·w_m) / S : dw_j;
//                       g_e = d_probs[t, e] (0 when absent) + Σ_j [i_j = e]·dL/ds_j;
//                       d_logits[t, e] = probs[t, e]·(g_e − Σ_f g_f·probs[t, f]).   (WRITTEN)
//   moe_dispatch:       a stable counting sort of the assignments by expert: offsets [E + 1]
//                       (expert e owns sorted rows [offsets[e], offsets[e + 1])), order [M]
//                       (sorted row → assignment) and position [M] (assignment → sorted row).
//   moe_permute:        out[p] = x[order[p] / k]                       [M, H]      (WRITTEN)
//   moe_permute_backward: d_x[t] = Σ_j d_out[position[t·k + j]]         [N, H]      (WRITTEN)
//   moe_unpermute:      out[t] = Σ_j weights[t, j]·y[position[t·k + j]] [N, H]      (WRITTEN)
//   moe_unpermute_backward: d_y[position[t·k + j]] = weights[t, j]·d_out[t];
//                       d_weights[t, j] = <d_out[t], y[position[t·k + j]]>       (both WRITTEN)
//   router_statistics:  probability_sum[e] = Σ_t probs[t, e]; counts[e] = #assignments to e.
// Every assignment owns one sorted row, so every permute / unpermute output element is written
// from a fixed order of additions: deterministic.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void router_topk_forward(const T* logits, int64_t tokens, int64_t experts, int64_t top_k, bool normalize,
                         T* weights, int32_t* indices, T* probs);

// d_probs may be nullptr (no gradient reaches the probabilities).
template <typename T>
void router_topk_backward(const T* d_weights, const T* d_probs, const T* probs, const int32_t* indices,
                          const T* weights, int64_t tokens, int64_t experts, int64_t top_k, bool normalize,
                          T* d_logits);

// Throws UserError when an index is outside [0, experts).
void moe_dispatch(const int32_t* indices, int64_t assignments, int64_t experts, int32_t* order, int32_t* position,
                  int32_t* offsets);

template <typename T>
void moe_permute(const T* x, const int32_t* order, int64_t assignments, int64_t top_k, int64_t width, T* out);

template <typename T>
void moe_permute_backward(const T* d_out, const int32_t* position, int64_t tokens, int64_t top_k, int64_t width,
                          T* d_x);

template <typename T, typename W>
void moe_unpermute(const T* y, const W* weights, const int32_t* position, int64_t tokens, int64_t top_k,
                   int64_t width, T* out);

template <typename T, typename W>
void moe_unpermute_backward(const T* d_out, const T* y, const W* weights, const int32_t* position, int64_t tokens,
                            int64_t top_k, int64_t width, T* d_y, W* d_weights);

template <typename T>
void router_statistics(const T* probs, const int32_t* indices, int64_t tokens, int64_t experts, int64_t top_k,
                       T* probability_sum, T* counts);

}  // namespace surogate::ops
