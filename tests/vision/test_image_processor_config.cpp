// preprocessor_config.json → ImageProcessorConfig: transformers' defaults and precedence, and a
// UserError naming the file and key for what the processor does not reproduce.
#include <gtest/gtest.h>

#include "user_error_of.h"
#include "vision/image_processor.h"
#include "vision/vision_test_helpers.h"

namespace surogate::vision {
namespace {

TEST(ImageProcessorConfig, DefaultsAreQwen2VLs) {
  const ImageProcessorConfig config = ImageProcessorConfig::from_json(nlohmann::json::object(), "p.json");
  EXPECT_EQ(config.patch_size, 14);
  EXPECT_EQ(config.temporal_patch_size, 2);
  EXPECT_EQ(config.merge_size, 2);
  EXPECT_EQ(config.min_pixels, 3136);
  EXPECT_EQ(config.max_pixels, 1003520);
  EXPECT_EQ(config.image_mean[0], 0.48145466);
  EXPECT_EQ(config.image_std[2], 0.27577711);
}

TEST(ImageProcessorConfig, TopLevelPixelsOverrideSize) {
  const auto json = nlohmann::json::parse(
      R"({"size": {"shortest_edge": 100, "longest_edge": 5000}, "max_pixels": 4000, "patch_size": 16,
          "image_mean": 0.5, "image_std": [0.25, 0.5, 1.0]})");
  const ImageProcessorConfig config = ImageProcessorConfig::from_json(json, "p.json");
  EXPECT_EQ(config.min_pixels, 100);
  EXPECT_EQ(config.max_pixels, 4000);
  EXPECT_EQ(config.patch_size, 16);
  EXPECT_EQ(config.image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_EQ(config.image_std, (std::array<double, 3>{0.25, 0.5, 1.0}));
}

TEST(ImageProcessorConfig, FixtureFolders) {
  const auto qwen3 = ImageProcessorConfig::from_folder(testing::fixtures_dir() / "qwen3_vl");
  EXPECT_EQ(qwen3.patch_size, 16);
  EXPECT_EQ(qwen3.min_pixels, 4096);
  EXPECT_EQ(qwen3.max_pixels, 16384);
  const auto qwen25 = ImageProcessorConfig::from_folder(testing::fixtures_dir() / "qwen2_5_vl");
  EXPECT_EQ(qwen25.patch_size, 14);
  EXPECT_EQ(qwen25.max_pixels, 12544);
}

TEST(ImageProcessorConfig, RefusesWhatItDoesNotReproduce) {
  auto error = [](const char* text) {
    return error_of([&] { ImageProcessorConfig::from_json(nlohmann::json::parse(text), "m/preprocessor_config.json"); });
  };
  EXPECT_EQ(error(R"({"resample": 2})"), "m/preprocessor_config.json: 'resample' must be 3 (bicubic), the only filter reproduced");
  EXPECT_NE(error(R"({"image_processor_type": "SiglipImageProcessor"})")
                .find("m/preprocessor_config.json: 'image_processor_type' is SiglipImageProcessor"),
            std::string::npos);
  EXPECT_NE(error(R"({"do_resize": false})").find("'do_resize' must be true"), std::string::npos);
  EXPECT_NE(error(R"({"image_mean": [0.5, 0.5]})").find("'image_mean' must be a number or a list of 3"), std::string::npos);
  EXPECT_NE(error(R"({"min_pixels": 9000, "max_pixels": 100})").find("min_pixels (9000) is above max_pixels (100)"),
            std::string::npos);
  EXPECT_NE(error(R"({"patch_size": 0})").find("'patch_size' must be positive"), std::string::npos);
  const std::string missing = error_of([] { ImageProcessorConfig::from_folder("/no/model"); });
  EXPECT_EQ(missing, "/no/model/preprocessor_config.json: not found; a vision-language model folder needs its image "
                     "processor's config");
}

}  // namespace
}  // namespace surogate::vision
