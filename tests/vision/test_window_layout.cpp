// The windowed attention layout of Qwen2.5-VL's vision tower (vision/window_layout.h) on a
// hand-worked two-frame grid: transformers' get_vision_window_index order and boundaries (its
// empty padding windows dropped), and the tower's index inputs derived from them. The layout
// against transformers itself: models_parity_tests VisionTower.WindowLayoutMatchesTransformers
// and tests/python/test_vision_tower.py.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "core/error.h"
#include "vision/window_layout.h"

namespace surogate::vision {
namespace {

// Grid (2 frames, 4 × 6 patches), merge 2: each frame is 2 × 3 merged patches
//   0 1 2
//   3 4 5      (frame 1: 6..11)
// cut into windows of 2 × 2 merged patches (window 4 = 2 · merge · patch 1): [0 1 3 4], [2 5].
TEST(WindowLayout, TwoFramesWithANarrowWindow) {
  const std::vector<std::array<int64_t, 3>> grids{{2, 4, 6}};
  const WindowLayout layout = window_layout(grids, 2, 4, 1);
  EXPECT_EQ(layout.window_index, (std::vector<int32_t>{0, 1, 3, 4, 2, 5, 6, 7, 9, 10, 8, 11}));
  EXPECT_EQ(layout.cu_window_seqlens, (std::vector<int32_t>{0, 16, 24, 40, 48}));

  const VisionTowerIndices indices = vision_tower_indices(grids, 2, 4, 1);
  ASSERT_EQ(indices.patch_order.size(), 48u);
  // Window-order patches 8..11 are merged patch 3, pixel_values rows 12..15.
  EXPECT_EQ(std::vector<int32_t>(indices.patch_order.begin() + 8, indices.patch_order.begin() + 12),
            (std::vector<int32_t>{12, 13, 14, 15}));
  // ... at rows 2, 2, 3, 3 and columns 0, 1, 0, 1 of frame 0; window-order patch 24 is frame 1's first.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(indices.position_ids[0 * 48 + 8 + i], 0);
    EXPECT_EQ(indices.position_ids[1 * 48 + 8 + i], 2 + i / 2);
    EXPECT_EQ(indices.position_ids[2 * 48 + 8 + i], i % 2);
  }
  EXPECT_EQ(indices.position_ids[24], 1);
  EXPECT_EQ(indices.merged_restore, (std::vector<int32_t>{0, 1, 4, 2, 3, 5, 6, 7, 10, 8, 9, 11}));
  std::vector<int32_t> windows, frames;
  for (int32_t w : {0, 1, 2, 3}) windows.insert(windows.end(), w % 2 ? 8 : 16, w);
  for (int32_t f : {0, 1}) frames.insert(frames.end(), 24, f);
  EXPECT_EQ(indices.window_document_ids, windows);
  EXPECT_EQ(indices.frame_document_ids, frames);
}

// A window at least as large as the image is one window per frame, in pixel_values' order.
TEST(WindowLayout, WindowCoveringTheImageKeepsTheOrder) {
  const std::vector<std::array<int64_t, 3>> grids{{1, 4, 4}, {1, 2, 6}};
  const VisionTowerIndices indices = vision_tower_indices(grids, 2, 112, 14);
  for (size_t i = 0; i < indices.patch_order.size(); ++i) EXPECT_EQ(indices.patch_order[i], static_cast<int32_t>(i));
  EXPECT_EQ(indices.window_document_ids, indices.frame_document_ids);
}

TEST(WindowLayout, WindowSmallerThanAMergedPatchIsAnError) {
  const std::vector<std::array<int64_t, 3>> grids{{1, 4, 4}};
  EXPECT_THROW(window_layout(grids, 2, 16, 14), UserError);
}

}  // namespace
}  // namespace surogate::vision
