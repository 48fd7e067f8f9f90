// The dry run's vision tower plan (train/vision_memory_plan.h): the most patches one row holds
// once its images are resized again under a smaller max_pixels, and the largest max_pixels under
// which a plan fits. Expected values from transformers' smart_resize in Python (factor 28,
// min_pixels 3136), written out here.
#include <unistd.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "train/memory_prediction.h"
#include "train/vision_memory_plan.h"
#include "vision_model_folder.h"

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

namespace fs = std::filesystem;
const fs::path kVision = fs::path(SUROGATE_FIXTURES_DIR) / "vision";

Config dry_run_config() {
  const fs::path folder = surogate::testing::vision_model_folder(
      "vision_memory_plan_model",
      R"({"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 256, "max_pixels": 2048,)"
      R"( "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2})",
      /*weights=*/true);
  Config c;
  c.model.name_or_path = folder.string();
  c.model.sequence_len = 256;
  DatasetConfig dataset;
  dataset.path = (kVision / "rows" / "rows.jsonl").string();
  dataset.type = DatasetType::Conversation;
  c.data.datasets = {dataset};
  c.data.sample_packing = false;  // one document per row: the rows keep their images under any max_pixels
  c.eval.validation_split_ratio = 0.0;
  c.schedule.per_device_train_batch_size = 1;
  c.run.output_dir = (fs::path(::testing::TempDir()) / ("vision_memory_plan_run_" + std::to_string(::getpid()))).string();
  return c;
}

// A GPU whose memory fits the plan of the smallest images but not the data's: the prediction
// names max_pixels first, with a value under which the plan fits; a dry run writes no token cache.
TEST(VisionMemoryPlan, TheDryRunNamesTheMaxPixelsThatFits) {
  const Config config = dry_run_config();
  const size_t large = size_t{100} << 30;
  const MemoryPrediction data = predict_training_memory(config, large);
  EXPECT_NE(data.vision.find("vision tower planned for"), std::string::npos) << data.vision;
  // The least each needs: on a GPU that nothing fits (1 GiB, all of it kept free), the plan
  // recomputes everything it may.
  const size_t none = size_t{1} << 30;
  Config smallest = config;
  smallest.data.max_pixels = 256;
  const size_t least_small = predict_training_memory(smallest, none).total_bytes;
  const size_t least_data = predict_training_memory(config, none).total_bytes;
  ASSERT_GT(least_data, least_small);
  // 1 GiB is kept free below 50 GiB (device_margin_bytes).
  const size_t gpu = (size_t{1} << 30) + (least_data + least_small) / 2;
  const MemoryPrediction tight = predict_training_memory(config, gpu);
  ASSERT_FALSE(tight.fits);
  ASSERT_FALSE(tight.suggestions.empty());
  const std::string& first = tight.suggestions.front();
  ASSERT_EQ(first.rfind("max_pixels: ", 0), 0u) << first;
  Config lowered = config;
  lowered.data.max_pixels = std::stoll(first.substr(std::string("max_pixels: ").size()));
  EXPECT_LT(*lowered.data.max_pixels, 2048);
  EXPECT_GE(*lowered.data.max_pixels, 256);
  EXPECT_TRUE(predict_training_memory(lowered, gpu).fits) << first;
  EXPECT_FALSE(fs::exists(fs::path(config.run.output_dir) / "tokenized"));
}

}  // namespace
}  // namespace surogate::train
