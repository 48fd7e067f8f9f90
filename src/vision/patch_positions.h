// Where each patch of the vision tower sits (Qwen2-VL / Qwen2.5-VL): transformers'
// get_vision_position_ids and get_vision_cu_seqlens (vision_utils.py). Patches come in
// pixel_values' merge-window order (image_processor.h), so patch p of a frame is at row
// (block_y · merge + my), column (block_x · merge + mx). The vision rotary embedding turns the
// first head_dim / 4 frequencies with the row and the next head_dim / 4 with the column: the
// mrope_cos_sin op (ops/mrope.h) with these positions, inv_freq = [f, f] (f: default RoPE
// frequencies of dimension head_dim / 2) and mrope_section = [0, head_dim / 4, head_dim / 4].
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace surogate::vision {

struct PatchLayout {
  // [3, patches] row-major: frame index (unused by the rotary tables), patch row, patch column.
  std::vector<int32_t> position_ids;
  // Attention segments, one per frame of each image: [0, h·w, 2·h·w, ...] (vision attention is
  // bidirectional within a segment and never crosses one).
  std::vector<int32_t> cu_seqlens;
};

PatchLayout patch_layout(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size);

}  // namespace surogate::vision
