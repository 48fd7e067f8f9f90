// Multimodal rotary position embedding (M-RoPE, Qwen2-VL / Qwen2.5-VL) exactly as transformers'
// Qwen2VLRotaryEmbedding + apply_rotary_pos_emb compute it. Each token has three position ids
// (temporal, height, width; vision/mrope_positions.h); the rotary frequencies are split into
// consecutive sections (`mrope_section`, e.g. [16, 24, 24] for head_dim 128) and frequency i of
// section k turns with the position of axis k:
//   angle[n, i] = float(position[k(i), n]) · inverse_frequency[i]
//   cos[n, i] = cos(angle) · attention_scaling, sin likewise
// (HF's recomposition_frequencies: cat(m[i % 3] for i, m in enumerate(freq.split(section)))).
// Qwen3-VL's interleaved layout (`mrope_interleaved`, Qwen3VLTextRotaryEmbedding) instead gives
// frequency i to the height axis when i % 3 == 1 and i < 3 · section_h, to the width axis when
// i % 3 == 2 and i < 3 · section_w, and to the temporal axis otherwise.
// With the three axes equal (text) this is ordinary RoPE. The rotation is rope.h's rotate_half
// rotation on these tables: rope_forward / rope_backward apply them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/rope.h"

namespace surogate::ops {

// The axis (0 temporal, 1 height, 2 width) each of `frequencies` frequencies turns with: sections
// consecutive (each section k reads axis k % 3, as transformers) or, with `interleaved`, three
// sizes [t, h, w] laid out as above. The sizes must sum to `frequencies` (internal error else).
std::vector<int64_t> mrope_axes(std::span<const int64_t> sections, int64_t frequencies, bool interleaved);

// position_ids: [3, tokens] row-major; sections as mrope_axes reads them. cos / sin: [tokens,
// rotary_dim / 2].
template <typename T>
void mrope_tables(const RopeFrequencies<T>& frequencies, const int32_t* position_ids, int64_t tokens,
                  std::span<const int64_t> sections, T* cos, T* sin, bool interleaved = false);

}  // namespace surogate::ops
