// The Qwen2.5-VL vision tower graph (models/vision_tower.h) against transformers'
// Qwen2_5_VisionTransformerPretrainedModel on tests/fixtures/vision/tower (written by
// scripts/make_vision_tower_fixtures.py: depth 4 with one full-attention block, two images whose
// grids make windows of every shape and an empty padding window). CPU backend, fp32.
// Tolerances, as max |ours − hf| / max |hf| over the tensor:
//   features:                      1e-5
//   weight gradients of the loss:  1e-4   (loss = sum(features · fixed random projection))
// The window layout (vision/window_layout.h) equals transformers' get_vision_window_index exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <span>

#include "core/error.h"
#include "fixture_util.h"
#include "vision_tower_run.h"

namespace surogate::models {
namespace {

using testing::VisionTowerRun;

constexpr double kFeatureTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

const std::filesystem::path kTowerDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "tower";

std::vector<std::array<int64_t, 3>> grids_of(const io::SafetensorsFile& expected) {
  const std::vector<int32_t> flat = testing::read_ints(expected, "grid_thw");
  std::vector<std::array<int64_t, 3>> grids;
  for (size_t i = 0; i + 2 < flat.size(); i += 3) grids.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return grids;
}

TEST(VisionTower, WindowLayoutMatchesTransformers) {
  const VisionTowerConfig config = VisionTowerConfig::from_config_json(kTowerDir / "config.json");
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kTowerDir / "expected.safetensors");
  const auto grids = grids_of(expected);
  const vision::WindowLayout layout =
      vision::window_layout(grids, static_cast<int>(config.spatial_merge_size), static_cast<int>(config.window_size),
                            static_cast<int>(config.patch_size));
  EXPECT_EQ(layout.window_index, testing::read_ints(expected, "window_index"));
  EXPECT_EQ(layout.cu_window_seqlens, testing::read_ints(expected, "cu_window_seqlens"));
}

TEST(VisionTower, FeaturesAndWeightGradientsMatchTransformers) {
  const VisionTowerConfig config = VisionTowerConfig::from_config_json(kTowerDir / "config.json");
  EXPECT_EQ(config.depth, 4);
  EXPECT_EQ(config.fullatt_block_indexes, std::vector<int64_t>{2});
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kTowerDir / "expected.safetensors");
  const auto grids = grids_of(expected);
  const std::vector<float> pixel_values = io::read_tensor_as_float32(expected.tensor("pixel_values"));
  const std::vector<float> projection = io::read_tensor_as_float32(expected.tensor("projection"));

  const VisionTowerRun run = testing::run_vision_tower(kTowerDir, config, grids, pixel_values, projection);
  EXPECT_LT(testing::scaled_max_error(run.features, io::read_tensor_as_float32(expected.tensor("features"))),
            kFeatureTolerance);

  size_t gradients = 0;
  for (const VisionTowerParameter& parameter : vision_tower_parameters(config)) {
    const io::SafetensorsTensor* hf = expected.find("grad." + parameter.name);
    if (hf == nullptr) continue;
    ++gradients;
    EXPECT_LT(testing::scaled_max_error(run.gradients.at(parameter.name), io::read_tensor_as_float32(*hf)), kGradientTolerance)
        << parameter.name;
  }
  EXPECT_EQ(gradients, 10u);  // the fixture's GRADIENTS
}

// A vision_config the tower does not reproduce is one UserError naming the key.
TEST(VisionTower, ConfigErrorsNameTheKey) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "vision_tower_config";
  std::filesystem::create_directories(dir);
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(dir / "config.json") << text;
    try {
      VisionTowerConfig::from_config_json(dir / "config.json");
    } catch (const UserError& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string base = R"("depth": 2, "hidden_size": 16, "intermediate_size": 8, "out_hidden_size": 8)";
  EXPECT_NE(error_of(R"({"text_config": {}})").find("vision_config"), std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "hidden_act": "gelu"}})").find("hidden_act"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 8}})").find("num_heads"), std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "fullatt_block_indexes": [2]}})")
                .find("fullatt_block_indexes"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {"depth": 2, "num_heads": 2}})").find("hidden_size"), std::string::npos);
  // A checkpoint without the tower.
  EXPECT_THROW(load_vision_tower_weights(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "qwen2_bias_tied",
                                         VisionTowerConfig::from_config_json(kTowerDir / "config.json"),
                                         [](const VisionTowerParameter&, const io::SafetensorsTensor&) {}),
               UserError);
}

}  // namespace
}  // namespace surogate::models
