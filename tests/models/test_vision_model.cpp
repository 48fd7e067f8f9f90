// The whole Qwen2.5-VL model graph (models/vision_model.h: tower, splice of its features at the
// image pads, Qwen2-style text decoder with M-RoPE, LM loss) against transformers'
// Qwen2_5_VLForConditionalGeneration on tests/fixtures/vision/vl (written by
// scripts/make_vision_model_fixtures.py: the tower of the vision tower fixture, a 2-layer text
// model, two rows with three images of two grids, labels only on the assistant tails).
// CPU backend, fp32. Tolerances:
//   loss:              rel 1e-5
//   weight gradients:  1e-4 as max |ours − hf| / max |hf| (text and tower weights)
// The M-RoPE positions of vision/mrope_positions.h equal transformers' get_rope_index exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "fixture_util.h"
#include "models/vision_model.h"
#include "vision_model_run.h"

namespace surogate::models {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

const std::filesystem::path kModelDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "vl";

TEST(VisionModel, ConfigReadsTextModelAndMropeSections) {
  const VisionModelConfig config = VisionModelConfig::from_folder(kModelDir);
  EXPECT_EQ(config.text.architecture, io::Architecture::Qwen2);
  EXPECT_TRUE(config.text.qkv_bias);
  EXPECT_EQ(config.text.num_hidden_layers, 2);
  EXPECT_EQ(config.mrope_section, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(config.image_token_id, 151);
  EXPECT_EQ(config.vision.depth, 4);
}

TEST(VisionModel, LossAndWeightGradientsMatchTransformers) {
  const VisionModelConfig config = VisionModelConfig::from_folder(kModelDir);
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kModelDir / "expected.safetensors");
  const testing::VisionModelRun run = testing::run_vision_model(kModelDir, config, expected);
  EXPECT_EQ(run.position_ids, testing::read_ints(expected, "position_ids"));
  const float hf_loss = io::read_tensor_as_float32(expected.tensor("loss"))[0];
  EXPECT_LT(std::abs(run.loss - hf_loss) / std::abs(hf_loss), kLossTolerance) << run.loss << " vs " << hf_loss;
  size_t checked = 0;
  for (const auto& [name, gradient] : run.gradients) {
    const io::SafetensorsTensor* hf = expected.find("grad." + name);
    if (hf == nullptr) continue;
    ++checked;
    EXPECT_LT(testing::scaled_max_error(gradient, io::read_tensor_as_float32(*hf)), kGradientTolerance) << name;
  }
  EXPECT_EQ(checked, 9u);  // the fixture's GRADIENTS: six text weights, three tower weights
}

TEST(VisionModel, SpliceIndexPutsFeaturesAtImagePadsInOrder) {
  const std::vector<int32_t> ids{5, 9, 9, 7, 9, 2};
  EXPECT_EQ(vision_splice_index(ids, 2, 3, 9, 3, "row"), (std::vector<int32_t>{0, 6, 7, 3, 8, 5}));
  EXPECT_THROW(vision_splice_index(ids, 2, 3, 9, 2, "row"), UserError);
}

TEST(VisionModel, ConfigErrorsNameTheFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "vision_model_config";
  std::filesystem::create_directories(dir);
  std::ifstream source(kModelDir / "config.json");
  nlohmann::json json = nlohmann::json::parse(source);
  auto error_of = [&](const nlohmann::json& config) -> std::string {
    std::ofstream(dir / "config.json") << config.dump();
    try {
      VisionModelConfig::from_folder(dir);
    } catch (const UserError& error) {
      return error.what();
    }
    return "no error";
  };
  nlohmann::json other = json;
  other["architectures"] = {"Qwen2VLForConditionalGeneration"};
  EXPECT_NE(error_of(other).find("architectures"), std::string::npos);
  nlohmann::json no_sections = json;
  no_sections["text_config"]["rope_parameters"].erase("mrope_section");
  EXPECT_NE(error_of(no_sections).find("mrope_section"), std::string::npos);
  // The hub's older layout: text settings top-level, rope_scaling of type mrope.
  nlohmann::json flat = json["text_config"];
  flat["vision_config"] = json["vision_config"];
  flat["architectures"] = json["architectures"];
  flat["image_token_id"] = 151;
  flat["rope_theta"] = 10000.0;
  flat.erase("rope_parameters");
  flat["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {2, 2, 2}}};
  std::ofstream(dir / "config.json") << flat.dump();
  const VisionModelConfig config = VisionModelConfig::from_folder(dir);
  EXPECT_EQ(config.mrope_section, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(config.text.hidden_size, 24);
}

}  // namespace
}  // namespace surogate::models
