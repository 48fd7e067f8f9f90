// Qwen3-VL's learned position embeddings resampled to each image's patch grid: transformers'
// get_vision_interpolation_indices_and_weights (vision_utils.py) with mode "bilinear",
// align_corners true, border padding and the spatial merge order, which is what
// Qwen3VLVisionModel's forward (its former fast_pos_embed_interpolate) calls. The table is a
// side × side grid (side = sqrt(num_position_embeddings)); patch (row, column) of an h × w grid
// reads it at src_y = row · (side − 1) / max(h − 1, 1), src_x likewise, from the four taps
// (floor, floor + 1 on each axis, clamped to the grid) weighted by (1 − |src − tap|) per axis.
// Every step is float32 as torch computes it, so the weights are transformers' bit for bit.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace surogate::vision {

inline constexpr int kInterpolationTaps = 4;

struct PositionInterpolation {
  // [4, patches] tap-major: the pos_embed row of tap k of patch p is taps[k · patches + p]; the
  // taps are (y0, x0), (y0, x1), (y1, x0), (y1, x1), transformers' order.
  std::vector<int32_t> taps;
  std::vector<float> weights;  // [4, patches], the same layout
};

// For patches in pixel_values' merge-window order (image_processor.h), every frame of an image
// reading the same embeddings. A side below 1 or a grid not a multiple of `merge_size` is an
// internal error (the config and the processor check them).
PositionInterpolation position_interpolation(std::span<const std::array<int64_t, 3>> grid_thw, int64_t side,
                                             int merge_size);

}  // namespace surogate::vision
