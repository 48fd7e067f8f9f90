// train/vision_stage.h: a Qwen2.5-VL folder as the trainer sees it, on tests/fixtures/vision/vl
// (transformers 5's names: model.language_model.*, model.visual.*) with a processor of the
// tower's patch geometry. tests/python/test_vision_sft.py trains such a folder end to end.
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "config/config.h"
#include "io/safetensors.h"
#include "models/lora.h"
#include "ops/defs/register_ops.h"
#include "train/vision_stage.h"
#include "train/vision_stage_fixture.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

// The fixture model (vision/vl, or vision/qwen3_vl_model) with a processor of patch 4, merge 2
// (the tower's) and a dataset entry.
Config stage_config(const std::string& fixture = "vl") {
  return vision_fixture::vision_stage_config(fixture, "vision_stage_model_");
}

TEST(VisionStage, ATextFolderHasNone) {
  Config config;
  config.model.name_or_path = (fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3").string();
  EXPECT_EQ(vision_stage(config), nullptr);
}

TEST(VisionStage, ParametersAreTheTextModelsUnderTheFoldersNamesThenTheTowers) {
  const auto stage = vision_stage(stage_config());
  ASSERT_NE(stage, nullptr);
  const std::vector<models::ParameterSpec>& specs = stage->specs();
  EXPECT_EQ(specs.front().name, "embed.weight");
  EXPECT_EQ(specs.front().hf_name, "model.language_model.embed_tokens.weight");
  EXPECT_EQ(specs.back().name.rfind("visual.", 0), 0u) << specs.back().name;
  EXPECT_EQ(stage->text().num_hidden_layers, 2);
}

TEST(VisionStage, AdaptersGetTheLanguageModelsPeftKeys) {
  const auto stage = vision_stage(stage_config());
  models::LoraSetup lora;
  lora.options.target_modules = {"q_proj", "down_proj"};
  lora.adapters = models::lora_adapters(stage->text(), lora.options);
  stage->name_adapters(lora);
  ASSERT_EQ(lora.adapters.size(), 4u);
  EXPECT_EQ(lora.adapters[0].a.hf_name, "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(lora.adapters[0].b.hf_name, "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_B.weight");
  nlohmann::json adapter_config = nlohmann::json::object();
  stage->restrict_adapter_config(adapter_config, lora);
  EXPECT_EQ(adapter_config["exclude_modules"], ".*visual.*");
}

// Every parameter's values are the checkpoint's (the patch embedding's 5-D weight as 2-D), for
// both families, each reported to the caller once read.
class VisionStageFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionStageFamilies, WeightsAreTheCheckpoints) {
  const Config config = stage_config(GetParam());
  const auto stage = vision_stage(config);
  std::vector<std::vector<float>> storage;
  std::vector<WeightView> views;
  for (const models::ParameterSpec& spec : stage->specs()) storage.emplace_back(graph::shape_numel(spec.shape), -7.0f);
  for (size_t i = 0; i < storage.size(); ++i) {
    views.push_back({stage->specs()[i].name, stage->specs()[i].shape, storage[i]});
  }
  // Each view reported once it holds its values, the text model's in specs() order (the order
  // QLoRA's quantizer takes them in: train/base_weights.h).
  std::vector<size_t> written;
  stage->load_weights(views, [&](size_t index) {
    EXPECT_NE(storage[index].front(), -7.0f) << stage->specs()[index].name << " reported before it was read";
    written.push_back(index);
  });
  const size_t text = static_cast<size_t>(std::count_if(stage->specs().begin(), stage->specs().end(), [](const auto& spec) {
    return spec.hf_name.rfind("visual.", 0) != 0;
  }));
  ASSERT_EQ(written.size(), views.size());
  EXPECT_TRUE(std::is_sorted(written.begin(), written.begin() + static_cast<std::ptrdiff_t>(text)));
  std::vector<size_t> sorted = written;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a view reported twice";
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(config.model.name_or_path);
  for (size_t i = 0; i < views.size(); ++i) {
    const std::string& hf_name = stage->specs()[i].hf_name;
    const std::string stored = hf_name.rfind("visual.", 0) == 0 ? "model." + hf_name : hf_name;
    EXPECT_EQ(io::read_tensor_as_float32(checkpoint.tensor(stored)), storage[i]) << stored;
  }
}

// The graph is the whole model for the plan's patch count, the tower frozen.
TEST_P(VisionStageFamilies, TheGraphHasThePlansPatchesAndAFrozenTower) {
  const auto stage = vision_stage(stage_config(GetParam()));
  stage->set_plan_patches(1, 2);  // at least one merged patch (4) per plan, whatever the rows hold
  EXPECT_EQ(stage->plan_patches(), 4);
  stage->set_plan_patches(32, 2);  // B × the most patches one row holds
  EXPECT_EQ(stage->plan_patches(), 64);
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options;
  options.batch = 2;
  options.sequence = 8;
  const models::DecoderGraph graph = stage->build_graph(registry, options);
  const graph::TensorInfo& pixels = graph.graph.tensors[static_cast<size_t>(*graph.graph.find_tensor("pixel_values"))];
  EXPECT_EQ(pixels.type.numel() / pixels.type.shape.back(), 64);  // [P, ·], Qwen3-VL's [1, P, ·]
  int frozen = 0, trained = 0;
  for (graph::TensorId id : graph.graph.parameters) {
    const graph::TensorInfo& tensor = graph.graph.tensors[static_cast<size_t>(id)];
    if (tensor.role != graph::TensorRole::Parameter) continue;
    const bool tower = tensor.name.rfind("visual.", 0) == 0;
    if (tower) {
      EXPECT_FALSE(tensor.trainable) << tensor.name;
      ++frozen;
    } else if (tensor.trainable) {
      ++trained;
    }
  }
  EXPECT_GT(frozen, 0);
  EXPECT_GT(trained, 0);  // the text model's (LoRA freezes them later)
  // The evaluator's graph: the same model at its own patch count (the dry run's: the training one).
  EXPECT_EQ(stage->eval_patches(), 64);
  const models::DecoderGraph eval = stage->build_graph(registry, options, 12);
  const graph::TensorInfo& eval_pixels = eval.graph.tensors[static_cast<size_t>(*eval.graph.find_tensor("pixel_values"))];
  EXPECT_EQ(eval_pixels.type.numel() / eval_pixels.type.shape.back(), 12);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

// A trained or merged model folder (train/vision_outputs.h): the source folder with the text
// weights replaced, each in the source's dtype under its name; the tower byte for byte (the
// 5-D patch embedding as stored; Qwen3-VL's position table and DeepStack mergers); config.json
// and the other files as they are.
TEST_P(VisionStageFamilies, TheSavedModelIsTheSourceWithTheTextWeightsReplaced) {
  const Config config = stage_config(GetParam());
  const auto stage = vision_stage(config);
  std::vector<std::vector<float>> storage;
  std::vector<WeightView> views;
  for (const models::ParameterSpec& spec : stage->specs()) storage.emplace_back(graph::shape_numel(spec.shape));
  for (size_t i = 0; i < storage.size(); ++i) views.push_back({stage->specs()[i].name, stage->specs()[i].shape, storage[i]});
  stage->load_weights(views);
  std::map<std::string, std::vector<float>> trained;  // by checkpoint name
  for (size_t i = 0; i < storage.size(); ++i) {
    const models::ParameterSpec& spec = stage->specs()[i];
    if (spec.name.rfind("visual.", 0) == 0) {
      std::fill(storage[i].begin(), storage[i].end(), 99.0f);  // never read: the folder's tower is copied
      continue;
    }
    for (size_t k = 0; k < storage[i].size(); ++k) storage[i][k] += 0.25f * static_cast<float>(k % 3);
    trained[spec.hf_name] = storage[i];
  }
  const fs::path out =
      fs::path(::testing::TempDir()) / ("vision_stage_saved_" + GetParam() + "_" + std::to_string(::getpid()));
  fs::remove_all(out);
  stage->save_model(out, views);
  const fs::path source(config.model.name_or_path);
  for (const char* file : {"config.json", "preprocessor_config.json", "tokenizer.json"}) {
    EXPECT_EQ(file_bytes(out / file), file_bytes(source / file)) << file;
  }
  const io::SafetensorsCheckpoint theirs = io::SafetensorsCheckpoint::open(source);
  const io::SafetensorsCheckpoint ours = io::SafetensorsCheckpoint::open(out);
  std::vector<std::string> our_names = ours.tensor_names(), their_names = theirs.tensor_names();
  std::sort(our_names.begin(), our_names.end());
  std::sort(their_names.begin(), their_names.end());
  EXPECT_EQ(our_names, their_names);
  bool five_dimensional = false;
  for (const std::string& name : theirs.tensor_names()) {
    const io::SafetensorsTensor& expected = theirs.tensor(name);
    const io::SafetensorsTensor* written = ours.find(name);
    ASSERT_NE(written, nullptr) << name;
    EXPECT_EQ(written->dtype, expected.dtype) << name;
    EXPECT_EQ(written->shape, expected.shape) << name;
    if (name.find("visual.") != std::string::npos) {
      five_dimensional = five_dimensional || expected.shape.size() == 5;
      EXPECT_TRUE(std::equal(written->bytes.begin(), written->bytes.end(), expected.bytes.begin(), expected.bytes.end()))
          << name;
    } else {
      ASSERT_TRUE(trained.contains(name)) << name;
      EXPECT_EQ(io::read_tensor_as_float32(*written), trained.at(name)) << name;  // fp32 fixture: exact
    }
  }
  EXPECT_TRUE(five_dimensional);
}

INSTANTIATE_TEST_SUITE_P(QwenVL, VisionStageFamilies, ::testing::Values("vl", "qwen3_vl_model"));

TEST(VisionStage, AQwen3VLFolderReadsItsTextModelAndTower) {
  const auto stage = vision_stage(stage_config("qwen3_vl_model"));
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->text().architecture, io::Architecture::Qwen3);
  EXPECT_TRUE(std::holds_alternative<models::Qwen3VLModelConfig>(stage->model()));
  const std::vector<models::ParameterSpec>& specs = stage->specs();
  EXPECT_EQ(specs.front().hf_name, "model.language_model.embed_tokens.weight");
  EXPECT_EQ(specs.back().name, "visual.deepstack_merger_list.1.linear_fc2.bias");
}

}  // namespace
}  // namespace surogate::train
