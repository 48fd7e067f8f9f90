// Rotary position embedding (RoPE) exactly as Hugging Face transformers computes it for
// Llama / Mistral / Qwen2 / Qwen3: inverse frequencies from the resolved io::RopeConfig
// (default, linear, dynamic NTK, yarn, llama3 — the math of ROPE_INIT_FUNCTIONS, evaluated in
// T's precision in transformers' operation order, so T = float reproduces its fp32 tables),
// cos/sin tables for explicit position ids, and the rotate_half rotation.
//
// Position ids are an input [N] (int32): with packed sequences they restart at 0 for every
// document, so positions are never derived from the token index here.
//
// Tables: cos / sin are [N, rotary_dim / 2]; HF's tables are the same values repeated twice
// (cat(freqs, freqs)), we keep one copy. Both already include attention_scaling (yarn's
// attention factor, 1 for other types), exactly as HF multiplies its cos/sin.
//
// Rotation (rotate_half convention: first half / second half of the rotary part), per token
// n, head h, with half = rotary_dim / 2 and i < half, a = x[i], b = x[i + half]:
//   out[i]        = a·cos[n,i] − b·sin[n,i]
//   out[i + half] = b·cos[n,i] + a·sin[n,i]
//   out[j]        = x[j]  for rotary_dim ≤ j < head_dim (partial rotary: the tail passes)
// Backward is the transposed rotation (angle −θ, same scale): d_x WRITTEN. Forward and
// backward may run in place (out == x, d_x == d_out).
//
// Dynamic NTK depends on the sequence length L (HF uses L = max(position_ids) + 1, see
// rope_dynamic_sequence_length): with L' = max(L, original_max_position_embeddings),
//   theta' = theta · (factor · L' / original_max − (factor − 1))^(d / (d − 2))
// and then the default frequencies with theta'. (HF's module additionally caches the largest
// L seen during inference; a training step is stateless, which equals HF's first call.)
#pragma once

#include <cstdint>
#include <vector>

#include "io/model_config.h"

namespace surogate::ops {

template <typename T>
struct RopeFrequencies {
  std::vector<T> inverse_frequency;  // [rotary_dim / 2]
  T attention_scaling = T(1);        // multiplies cos and sin
};

// sequence_length only matters for RopeType::Dynamic.
template <typename T>
RopeFrequencies<T> rope_frequencies(const io::RopeConfig& config, int64_t sequence_length);

// max(position_ids) + 1: the L that HF's dynamic RoPE uses for a batch.
int64_t rope_dynamic_sequence_length(const int32_t* position_ids, int64_t tokens);

// cos / sin [tokens, rotary_dim / 2]: angle = position · inverse_frequency (in T, as HF's fp32
// matmul of inv_freq and position ids), then cos(angle) · attention_scaling.
template <typename T>
void rope_tables(const RopeFrequencies<T>& frequencies, const int32_t* position_ids, int64_t tokens,
                 T* cos, T* sin);

// x, out: [tokens, heads, head_dim]; rotary_dim even, ≤ head_dim.
template <typename T>
void rope_forward(const T* x, const T* cos, const T* sin, int64_t tokens, int64_t heads,
                  int64_t head_dim, int64_t rotary_dim, T* out);

template <typename T>
void rope_backward(const T* d_out, const T* cos, const T* sin, int64_t tokens, int64_t heads,
                   int64_t head_dim, int64_t rotary_dim, T* d_x);

}  // namespace surogate::ops
