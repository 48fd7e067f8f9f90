// The Qwen3-VL vision tower graph (models/qwen3_vision_tower.h) against transformers'
// Qwen3VLVisionModel on tests/fixtures/vision/qwen3_tower (written by
// scripts/make_qwen3_vision_tower_fixtures.py: depth 3, a 6 × 6 position grid resampled to grids
// 10 × 6, 4 × 8 and a two-frame 4 × 4, DeepStack after blocks [2, 0]). CPU backend, fp32.
// Tolerances, as max |ours − hf| / max |hf| over the tensor:
//   features and DeepStack features:  1e-5  (fp32 sums in another order than torch's)
//   weight gradients of the loss:     1e-4  (loss = Σ sum(feature · fixed random projection))
// The position-embedding taps and weights (vision/position_interpolation.h) equal transformers'
// get_vision_interpolation_indices_and_weights exactly.
#include <gtest/gtest.h>

#include <array>
#include <fstream>

#include "core/error.h"
#include "fixture_util.h"
#include "qwen3_vision_tower_run.h"
#include "vision/position_interpolation.h"

namespace surogate::models {
namespace {

constexpr double kFeatureTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

const std::filesystem::path kTowerDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "qwen3_tower";

std::vector<std::array<int64_t, 3>> grids_of(const io::SafetensorsFile& expected) {
  const std::vector<int32_t> flat = testing::read_ints(expected, "grid_thw");
  std::vector<std::array<int64_t, 3>> grids;
  for (size_t i = 0; i + 2 < flat.size(); i += 3) grids.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return grids;
}

TEST(Qwen3VisionTower, ConfigReadsTheFixture) {
  const Qwen3VisionTowerConfig config = Qwen3VisionTowerConfig::from_config_json(kTowerDir / "config.json");
  EXPECT_EQ(config.depth, 3);
  EXPECT_EQ(config.grid_side(), 6);
  EXPECT_EQ(config.deepstack_visual_indexes, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(config.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(config.patch_columns(), 3 * 2 * 4 * 4);
}

TEST(Qwen3VisionTower, PositionInterpolationMatchesTransformers) {
  const Qwen3VisionTowerConfig config = Qwen3VisionTowerConfig::from_config_json(kTowerDir / "config.json");
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kTowerDir / "expected.safetensors");
  const vision::PositionInterpolation interpolation =
      vision::position_interpolation(grids_of(expected), config.grid_side(), static_cast<int>(config.spatial_merge_size));
  EXPECT_EQ(interpolation.taps, testing::read_ints(expected, "interpolation_taps"));
  EXPECT_EQ(interpolation.weights, io::read_tensor_as_float32(expected.tensor("interpolation_weights")));
}

TEST(Qwen3VisionTower, FeaturesAndWeightGradientsMatchTransformers) {
  const Qwen3VisionTowerConfig config = Qwen3VisionTowerConfig::from_config_json(kTowerDir / "config.json");
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kTowerDir / "expected.safetensors");
  const auto grids = grids_of(expected);
  const std::vector<float> pixel_values = io::read_tensor_as_float32(expected.tensor("pixel_values"));
  std::vector<std::vector<float>> projections{io::read_tensor_as_float32(expected.tensor("projection"))};
  for (size_t i = 0; i < config.deepstack_visual_indexes.size(); ++i) {
    projections.push_back(io::read_tensor_as_float32(expected.tensor(testing::qwen3_projection_name(i))));
  }

  const testing::Qwen3VisionTowerRun run =
      testing::run_qwen3_vision_tower(kTowerDir, config, grids, pixel_values, projections);
  EXPECT_LT(testing::scaled_max_error(run.features, io::read_tensor_as_float32(expected.tensor("features"))),
            kFeatureTolerance);
  ASSERT_EQ(run.deepstack.size(), 2u);
  for (size_t i = 0; i < run.deepstack.size(); ++i) {
    EXPECT_LT(testing::scaled_max_error(run.deepstack[i],
                                        io::read_tensor_as_float32(expected.tensor("deepstack." + std::to_string(i)))),
              kFeatureTolerance)
        << "deepstack feature " << i;
  }
  size_t gradients = 0;
  for (const VisionTowerParameter& parameter : qwen3_vision_tower_parameters(config)) {
    const io::SafetensorsTensor* hf = expected.find("grad." + parameter.name);
    if (hf == nullptr) continue;
    ++gradients;
    EXPECT_LT(testing::scaled_max_error(run.gradients.at(parameter.name), io::read_tensor_as_float32(*hf)),
              kGradientTolerance)
        << parameter.name;
  }
  EXPECT_EQ(gradients, 10u);  // the fixture's GRADIENTS
}

// A vision_config the tower does not reproduce is one UserError naming the key.
TEST(Qwen3VisionTower, ConfigErrorsNameTheKey) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "qwen3_vision_tower_config";
  std::filesystem::create_directories(dir);
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(dir / "config.json") << text;
    try {
      Qwen3VisionTowerConfig::from_config_json(dir / "config.json");
    } catch (const UserError& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string base = R"("depth": 2, "hidden_size": 16, "intermediate_size": 8, "out_hidden_size": 8)";
  EXPECT_EQ(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2}})"), "no error");
  EXPECT_NE(error_of(R"({"text_config": {}})").find("vision_config"), std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "hidden_act": "silu"}})").find("hidden_act"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 8}})").find("num_heads"), std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "num_position_embeddings": 40}})")
                .find("num_position_embeddings"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "deepstack_visual_indexes": [2]}})")
                .find("deepstack_visual_indexes"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {)" + base + R"(, "num_heads": 2, "deepstack_visual_indexes": [1, 1]}})")
                .find("twice"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"vision_config": {"depth": 2, "num_heads": 2}})").find("hidden_size"), std::string::npos);
  // A checkpoint without the tower: a UserError naming the missing tensor.
  try {
    load_qwen3_vision_tower_weights(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "tower",
                                    Qwen3VisionTowerConfig::from_config_json(kTowerDir / "config.json"),
                                    [](const VisionTowerParameter&, const io::SafetensorsTensor&) {});
    ADD_FAILURE() << "no error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("visual.patch_embed.proj"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace surogate::models
