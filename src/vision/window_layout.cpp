#include "vision/window_layout.h"

#include <algorithm>

#include "core/error.h"
#include "vision/patch_positions.h"

namespace surogate::vision {

WindowLayout window_layout(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size, int window_size,
                           int patch_size) {
  SUROGATE_CHECK(merge_size > 0 && patch_size > 0, "merge_size and patch_size must be positive");
  const int64_t side = window_size / merge_size / patch_size;  // merged patches per window side
  if (side <= 0) {
    fail_user("vision_config: window_size {} is smaller than spatial_merge_size {} × patch_size {}", window_size,
              merge_size, patch_size);
  }
  const int64_t unit = int64_t{merge_size} * merge_size;
  WindowLayout layout;
  layout.cu_window_seqlens.push_back(0);
  int64_t offset = 0;  // merged patches of the images before
  for (const auto& grid : grid_thw) {
    SUROGATE_CHECK(grid[1] % merge_size == 0 && grid[2] % merge_size == 0, "grid {}x{} is not a multiple of merge {}",
                   grid[1], grid[2], merge_size);
    const int64_t rows = grid[1] / merge_size, columns = grid[2] / merge_size;
    // transformers pads to a whole window more than needed (a full window when the side divides):
    // those windows are empty and dropped by unique_consecutive, as here.
    const int64_t windows_y = (rows + side - 1) / side, windows_x = (columns + side - 1) / side;
    for (int64_t frame = 0; frame < grid[0]; ++frame) {
      for (int64_t wy = 0; wy < windows_y; ++wy) {
        for (int64_t wx = 0; wx < windows_x; ++wx) {
          for (int64_t y = wy * side; y < std::min(rows, (wy + 1) * side); ++y) {
            for (int64_t x = wx * side; x < std::min(columns, (wx + 1) * side); ++x) {
              layout.window_index.push_back(static_cast<int32_t>(offset + (frame * rows + y) * columns + x));
            }
          }
          layout.cu_window_seqlens.push_back(static_cast<int32_t>(layout.window_index.size() * unit));
        }
      }
    }
    offset += grid[0] * rows * columns;
  }
  return layout;
}

VisionTowerIndices vision_tower_indices(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size,
                                        int window_size, int patch_size) {
  const WindowLayout windows = window_layout(grid_thw, merge_size, window_size, patch_size);
  const PatchLayout patches = patch_layout(grid_thw, merge_size);
  const int64_t unit = int64_t{merge_size} * merge_size;
  const auto merged = static_cast<int64_t>(windows.window_index.size());
  const int64_t count = merged * unit;
  VisionTowerIndices indices;
  indices.patch_order.resize(static_cast<size_t>(count));
  indices.position_ids.resize(static_cast<size_t>(3 * count));
  indices.merged_restore.resize(static_cast<size_t>(merged));
  for (int64_t m = 0; m < merged; ++m) {
    const int64_t source = windows.window_index[static_cast<size_t>(m)];
    indices.merged_restore[static_cast<size_t>(source)] = static_cast<int32_t>(m);
    for (int64_t k = 0; k < unit; ++k) {
      const int64_t to = m * unit + k, from = source * unit + k;
      indices.patch_order[static_cast<size_t>(to)] = static_cast<int32_t>(from);
      for (int64_t axis = 0; axis < 3; ++axis) {
        indices.position_ids[static_cast<size_t>(axis * count + to)] =
            patches.position_ids[static_cast<size_t>(axis * count + from)];
      }
    }
  }
  // Windows and frames never cross, so both segmentations are contiguous runs in window order.
  auto runs = [count](const std::vector<int32_t>& boundaries) {
    std::vector<int32_t> ids(static_cast<size_t>(count));
    for (size_t segment = 0; segment + 1 < boundaries.size(); ++segment) {
      for (int32_t i = boundaries[segment]; i < boundaries[segment + 1]; ++i) {
        ids[static_cast<size_t>(i)] = static_cast<int32_t>(segment);
      }
    }
    return ids;
  };
  indices.window_document_ids = runs(windows.cu_window_seqlens);
  indices.frame_document_ids = runs(patches.cu_seqlens);
  return indices;
}

}  // namespace surogate::vision
