#include "vision/patch_positions.h"

#include "core/error.h"

namespace surogate::vision {

PatchLayout patch_layout(std::span<const std::array<int64_t, 3>> grid_thw, int merge_size) {
  SUROGATE_CHECK(merge_size > 0, "merge_size must be positive");
  int64_t patches = 0;
  for (const auto& grid : grid_thw) {
    SUROGATE_CHECK(grid[1] % merge_size == 0 && grid[2] % merge_size == 0, "grid {}x{} is not a multiple of merge {}",
                   grid[1], grid[2], merge_size);
    patches += grid[0] * grid[1] * grid[2];
  }
  PatchLayout layout;
  layout.position_ids.resize(static_cast<size_t>(3 * patches));
  layout.cu_seqlens.push_back(0);
  int64_t patch = 0;
  for (const auto& grid : grid_thw) {
    const int64_t blocks_x = grid[2] / merge_size;
    for (int64_t frame = 0; frame < grid[0]; ++frame) {
      for (int64_t k = 0; k < grid[1] * grid[2]; ++k, ++patch) {
        const int64_t block = k / (merge_size * merge_size), within = k % (merge_size * merge_size);
        layout.position_ids[patch] = static_cast<int32_t>(frame);
        layout.position_ids[patches + patch] = static_cast<int32_t>((block / blocks_x) * merge_size + within / merge_size);
        layout.position_ids[2 * patches + patch] =
            static_cast<int32_t>((block % blocks_x) * merge_size + within % merge_size);
      }
      layout.cu_seqlens.push_back(static_cast<int32_t>(patch));
    }
  }
  return layout;
}

}  // namespace surogate::vision
