// The windowed attention of Qwen2.5-VL's vision tower (transformers' get_vision_window_index,
// vision_utils.py, and the permutations of Qwen2_5_VisionTransformerPretrainedModel.forward).
// Each frame's merged patches (merge × merge patches, kept together) are cut into windows of
// window_size / merge / patch merged patches a side, counted from the top-left corner (the last
// row and column of windows may be narrower); the tower reorders its patches window by window,
// runs its window-attention blocks within each window and its full-attention blocks within each
// frame, and puts the merged output back in pixel_values' order at the end.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace surogate::vision {

struct WindowLayout {
  // transformers' window_index: for each merged patch in window order, its index in pixel_values'
  // merged order.
  std::vector<int32_t> window_index;
  // transformers' cu_window_seqlens (empty windows dropped): window boundaries in patches.
  std::vector<int32_t> cu_window_seqlens;
};

WindowLayout window_layout(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size, int window_size,
                           int patch_size);

// What the vision tower graph reads besides pixel_values (models/vision_tower.h), all in window
// order, for `patches` patches and `patches / merge²` merged patches.
struct VisionTowerIndices {
  std::vector<int32_t> patch_order;          // [patches]: window-order patch i is pixel_values row patch_order[i]
  std::vector<int32_t> position_ids;         // [3, patches]: (frame, row, column) of each, for mrope_cos_sin
  std::vector<int32_t> window_document_ids;  // [patches]: the window of each (window-attention blocks)
  std::vector<int32_t> frame_document_ids;   // [patches]: the frame of each (full-attention blocks)
  std::vector<int32_t> merged_restore;       // [merged]: row of the window-order output holding merged patch m
};

VisionTowerIndices vision_tower_indices(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size,
                                        int window_size, int patch_size);

}  // namespace surogate::vision
