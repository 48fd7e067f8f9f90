// See position_interpolation.h. The module is built with -ffp-contract=off: each float operation
// rounds as torch's does.
#include "vision/position_interpolation.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "vision/patch_positions.h"

namespace surogate::vision {
namespace {

struct AxisTaps {
  std::array<int32_t, 2> taps;
  std::array<float, 2> weights;
};

// transformers' _interpolation_axis_taps_weights for one position, bilinear, align_corners.
AxisTaps axis_taps(int64_t index, int64_t size, int64_t side) {
  const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                    static_cast<float>(std::max<int64_t>(size - 1, 1));
  const float floor = std::floor(src);
  AxisTaps result{};
  for (int offset = 0; offset < 2; ++offset) {
    const int64_t raw = static_cast<int64_t>(floor) + offset;
    result.taps[offset] = static_cast<int32_t>(std::clamp<int64_t>(raw, 0, side - 1));
    const float distance = std::fabs(src - floor - static_cast<float>(offset));
    result.weights[offset] = std::max(1.0f - distance, 0.0f);
  }
  return result;
}

}  // namespace

PositionInterpolation position_interpolation(std::span<const std::array<int64_t, 3>> grid_thw, int64_t side,
                                             int merge_size) {
  SUROGATE_CHECK(side > 0, "position interpolation: side {} must be positive", side);
  // Each patch's row and column in the merge-window order (patch_layout checks the grids).
  const PatchLayout layout = patch_layout(grid_thw, merge_size);
  const auto patches = static_cast<int64_t>(layout.position_ids.size() / 3);
  PositionInterpolation result;
  result.taps.resize(static_cast<size_t>(kInterpolationTaps * patches));
  result.weights.resize(static_cast<size_t>(kInterpolationTaps * patches));
  int64_t patch = 0;
  for (const auto& grid : grid_thw) {
    for (int64_t k = 0; k < grid[0] * grid[1] * grid[2]; ++k, ++patch) {
      const AxisTaps y = axis_taps(layout.position_ids[static_cast<size_t>(patches + patch)], grid[1], side);
      const AxisTaps x = axis_taps(layout.position_ids[static_cast<size_t>(2 * patches + patch)], grid[2], side);
      for (int a = 0; a < 2; ++a) {
        for (int b = 0; b < 2; ++b) {
          const auto slot = static_cast<size_t>((a * 2 + b) * patches + patch);
          result.taps[slot] = static_cast<int32_t>(y.taps[a] * side + x.taps[b]);
          result.weights[slot] = y.weights[a] * x.weights[b];
        }
      }
    }
  }
  return result;
}

}  // namespace surogate::vision
