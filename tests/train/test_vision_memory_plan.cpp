// The dry run's vision tower plan (train/vision_memory_plan.h): the most patches one row holds
// once its images are resized again under a smaller max_pixels, and the largest max_pixels under
// which a plan fits. Expected values from transformers' smart_resize in Python (factor 28,
// min_pixels 3136), written out here.
#include <gtest/gtest.h>

#include "train/vision_memory_plan.h"

namespace surogate::train {
namespace {

VisionRowImages two_rows() {
  VisionRowImages images;
  images.processor.min_pixels = 3136;
  images.processor.max_pixels = 12544;
  // Row 0: one 112 × 84 image (8 × 6 = 48 patches); row 1: 84 × 56 and 56 × 56 (24 + 16 = 40).
  images.rows = {{{112, 84}}, {{84, 56}, {56, 56}}};
  images.row_patches = 48;
  return images;
}

TEST(VisionMemoryPlan, RowPatchesFollowMaxPixels) {
  const VisionRowImages images = two_rows();
  EXPECT_EQ(row_patches_under(images, 12544), 48);  // the sizes the data has already
  // At min_pixels: 112 × 84 → 56 × 28 (8 patches), 84 × 56 → 56 × 28 (8), 56 × 56 stays (16).
  EXPECT_EQ(row_patches_under(images, 3136), 24);
}

TEST(VisionMemoryPlan, TheLargestMaxPixelsThatFits) {
  const VisionRowImages images = two_rows();
  int judged = 0;
  // Fits with at most 40 patches a row: up to 9407 pixels the 112 × 84 image (9408) shrinks to
  // 56 × 56 (16 patches) and row 1's 40 is the most.
  const auto fits_40 = [&](int64_t patches) {
    ++judged;
    return patches <= 40;
  };
  EXPECT_EQ(max_pixels_that_fits(images, fits_40), 9407);
  EXPECT_EQ(judged, 3);  // one plan per distinct patch count (24, 40, 48), not one per probe
  EXPECT_EQ(max_pixels_that_fits(images, [](int64_t patches) { return patches <= 10; }), std::nullopt);
  EXPECT_EQ(max_pixels_that_fits(images, [](int64_t) { return true; }), 12543);
}

}  // namespace
}  // namespace surogate::train
