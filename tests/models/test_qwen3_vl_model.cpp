// The whole Qwen3-VL model graph (models/qwen3_vl_model.h: tower, splice of its features at the
// image pads, Qwen3 text decoder with the interleaved M-RoPE, DeepStack features added after the
// first text layers, LM loss) against transformers' Qwen3VLForConditionalGeneration on
// tests/fixtures/vision/qwen3_vl_model (written by scripts/make_qwen3_vl_model_fixtures.py: the
// Qwen3-VL tower fixture's tower, a 2-layer Qwen3 text model, two rows with three images).
// CPU backend, fp32. Tolerances:
//   loss:              rel 1e-5
//   weight gradients:  1e-4 as max |ours − hf| / max |hf| (text and tower weights)
// The M-RoPE positions of vision/mrope_positions.h equal transformers' get_rope_index exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "fixture_util.h"
#include "qwen3_vl_model_run.h"

namespace surogate::models {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

const std::filesystem::path kModelDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "qwen3_vl_model";

TEST(Qwen3VLModel, ConfigReadsTextModelAndInterleavedSections) {
  const Qwen3VLModelConfig config = Qwen3VLModelConfig::from_folder(kModelDir);
  EXPECT_EQ(config.text.architecture, io::Architecture::Qwen3);
  EXPECT_TRUE(config.text.qk_norm);
  EXPECT_EQ(config.text.num_hidden_layers, 2);
  EXPECT_EQ(config.text.head_dim, 16);
  EXPECT_EQ(config.mrope_section, (std::vector<int64_t>{4, 2, 2}));
  EXPECT_TRUE(config.mrope_interleaved);
  EXPECT_EQ(config.image_token_id, 151);
  EXPECT_EQ(config.vision.depth, 3);
  EXPECT_EQ(config.vision.deepstack_visual_indexes, (std::vector<int64_t>{2, 0}));
}

TEST(Qwen3VLModel, LossAndWeightGradientsMatchTransformers) {
  const Qwen3VLModelConfig config = Qwen3VLModelConfig::from_folder(kModelDir);
  const io::SafetensorsFile expected = io::SafetensorsFile::open(kModelDir / "expected.safetensors");
  const testing::VisionModelRun run = testing::run_qwen3_vl_model(kModelDir, config, expected);
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
  EXPECT_EQ(checked, 13u);  // the fixture's GRADIENTS: seven text weights, six tower weights
}

TEST(Qwen3VLModel, DeepstackIndexReadsTheSplicedFeatures) {
  // Splice index of 2 × 3 rows with image pads at 1, 2 and 4 (features 0, 1, 2).
  const std::vector<int32_t> splice{0, 6, 7, 3, 8, 5};
  EXPECT_EQ(vision_deepstack_index(splice, 6), (std::vector<int32_t>{0, 1, 2, 0, 3, 0}));
}

TEST(Qwen3VLModel, ConfigErrorsNameTheKey) {
  // The Qwen2.5-VL fixture is refused naming the architecture, and the other way round.
  try {
    Qwen3VLModelConfig::from_folder(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "vl");
    ADD_FAILURE() << "no error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("Qwen3VLForConditionalGeneration"), std::string::npos) << error.what();
  }
  try {
    VisionModelConfig::from_folder(kModelDir);
    ADD_FAILURE() << "no error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("Qwen2_5_VLForConditionalGeneration"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace surogate::models
