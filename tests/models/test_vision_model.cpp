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

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "fixture_util.h"
#include "models/vision_model.h"
#include "ops/cross_entropy.h"
#include "vision/mrope_positions.h"
#include "vision_tower_run.h"

namespace surogate::models {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

const std::filesystem::path kModelDir = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "vl";

struct VisionModelRun {
  float loss = 0;
  std::map<std::string, std::vector<float>> gradients;  // by checkpoint name (transformers 5's)
};

// Forward and backward of the fixture's row; the loss is transformers' mean over the shifted
// labels (loss_scale = 1 / scored tokens).
VisionModelRun run_fixture(const VisionModelConfig& config, const io::SafetensorsFile& expected) {
  const std::vector<int32_t> input_ids = testing::read_ints(expected, "input_ids");
  const std::vector<int32_t> labels = testing::read_ints(expected, "labels");
  const std::vector<int32_t> flat_grids = testing::read_ints(expected, "grid_thw");
  std::vector<std::array<int64_t, 3>> grids;
  for (size_t i = 0; i + 2 < flat_grids.size(); i += 3) grids.push_back({flat_grids[i], flat_grids[i + 1], flat_grids[i + 2]});
  const std::vector<float> pixel_values = io::read_tensor_as_float32(expected.tensor("pixel_values"));
  const int64_t batch = expected.tensor("input_ids").shape[0], sequence = expected.tensor("input_ids").shape[1];
  const int64_t patches = static_cast<int64_t>(pixel_values.size()) / config.vision.patch_columns();
  const int merge = static_cast<int>(config.vision.spatial_merge_size);

  // Each row's positions from its own images (the grids in order, as many as its pads take),
  // laid out [3, B, T].
  std::vector<int32_t> position_ids(static_cast<size_t>(3 * batch * sequence));
  size_t next_image = 0;
  for (int64_t row = 0; row < batch; ++row) {
    const std::span<const int32_t> ids(input_ids.data() + row * sequence, static_cast<size_t>(sequence));
    int64_t pads = std::count(ids.begin(), ids.end(), config.image_token_id);
    const size_t first = next_image;
    for (; pads > 0 && next_image < grids.size(); ++next_image) {
      pads -= grids[next_image][0] * grids[next_image][1] * grids[next_image][2] / (merge * merge);
    }
    const std::span<const std::array<int64_t, 3>> row_grids(grids.data() + first, next_image - first);
    const vision::MropePositions positions = vision::mrope_positions(ids, config.image_token_id, row_grids, merge, {}, "fixture");
    for (int64_t axis = 0; axis < 3; ++axis) {
      std::copy_n(positions.ids.begin() + axis * sequence, sequence,
                  position_ids.begin() + (axis * batch + row) * sequence);
    }
  }
  EXPECT_EQ(next_image, grids.size());
  EXPECT_EQ(position_ids, testing::read_ints(expected, "position_ids"));
  std::vector<int32_t> targets(labels.size(), ops::kIgnoreIndex);
  int64_t scored = 0;
  for (size_t t = 0; t + 1 < labels.size(); ++t) {
    if ((t + 1) % static_cast<size_t>(sequence) == 0) continue;  // a row's last token predicts nothing
    targets[t] = labels[t + 1];
    scored += targets[t] != ops::kIgnoreIndex;
  }
  const float loss_scale = 1.0f / static_cast<float>(scored);
  const std::vector<int32_t> documents(input_ids.size(), 0);
  const std::vector<int32_t> splice = vision_splice_index(input_ids, batch, sequence, config.image_token_id,
                                                          patches / config.vision.merge_unit(), "fixture");
  const vision::VisionTowerIndices indices =
      vision::vision_tower_indices(grids, static_cast<int>(config.vision.spatial_merge_size),
                                   static_cast<int>(config.vision.window_size), static_cast<int>(config.vision.patch_size));

  const graph::OpRegistry registry = ops::make_model_registry();
  DecoderGraphOptions options;
  options.batch = batch;
  options.sequence = sequence;
  VisionModelGraph model = build_vision_model_graph(config, registry, options, patches, /*train_vision=*/true);
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(model.graph), model.loss, registry);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  std::map<std::string, std::string> engine_names;  // checkpoint name → engine name
  load_vision_model_text_weights(kModelDir, config, [&](const ParameterSpec& spec, const io::SafetensorsTensor& t) {
    backend.write_converted(plan.tensor(spec.name), t.dtype, t.bytes);
    engine_names[spec.hf_name] = spec.name;
  });
  load_vision_tower_weights(kModelDir, config.vision, [&](const VisionTowerParameter& parameter, const io::SafetensorsTensor& t) {
    backend.write_converted(plan.tensor(parameter.name), t.dtype, t.bytes);
    engine_names["model." + parameter.name] = parameter.name;
  });
  backend.zero_gradients();
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  std::vector<runtime::InputBinding> bindings = testing::vision_tower_bindings(plan, indices, pixel_values);
  bindings.push_back({plan.tensor("input_ids"), ints(input_ids)});
  bindings.push_back({plan.tensor("position_ids"), ints(position_ids)});
  bindings.push_back({plan.tensor("document_ids"), ints(documents)});
  bindings.push_back({plan.tensor("targets"), ints(targets)});
  bindings.push_back({plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1))});
  bindings.push_back({plan.tensor(kVisionSpliceIndex), ints(splice)});
  backend.execute(bindings);

  VisionModelRun run;
  backend.read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&run.loss, 1)));
  for (const auto& [hf_name, engine_name] : engine_names) {
    const graph::TensorId id = plan.tensor(engine_name);
    std::vector<float>& gradient = run.gradients[hf_name];
    gradient.resize(static_cast<size_t>(graph::shape_numel(plan.graph.tensor(id).type.shape)));
    backend.read(plan.parameter_gradients.at(id), std::as_writable_bytes(std::span<float>(gradient)));
  }
  return run;
}

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
  const VisionModelRun run = run_fixture(config, expected);
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
