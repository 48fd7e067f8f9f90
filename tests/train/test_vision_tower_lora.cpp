// freeze_vision: false (train/vision_tower_lora.h, train/vision_stage.h): the tower's parameters
// trainable in the graph, LoRA's target modules reaching the tower and the merger(s), their PEFT keys
// and adapter_config.json's exclusions, on tests/fixtures/vision/vl (Qwen2.5-VL, tower depth 4) and
// vision/qwen3_vl_model (Qwen3-VL, DeepStack mergers). tests/python/test_vision_tower_training.py and
// test_qwen3_vl_tower_training.py train such folders end to end against transformers and PEFT.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "ops/defs/register_ops.h"
#include "train/training_plan.h"
#include "train/vision_stage.h"
#include "train/vision_stage_fixture.h"
#include "train/vision_tower_lora.h"

namespace surogate::train {
namespace {
// The fixture model (vision/vl or vision/qwen3_vl_model) with a processor of the tower's geometry.
Config tower_config(bool freeze_vision, const std::string& fixture = "vl") {
  Config config = vision_fixture::vision_stage_config(fixture, "vision_tower_lora_");
  config.model.freeze_vision = freeze_vision;
  return config;
}

// adapter_config.json's exclude_modules the stage writes for `lora`.
nlohmann::json exclusion(const VisionStage& stage, const models::LoraSetup& lora) {
  nlohmann::json adapter_config = nlohmann::json::object();
  stage.restrict_adapter_config(adapter_config, lora);
  return adapter_config["exclude_modules"];
}

models::LoraSetup setup_for(const Config& config, const VisionStage& stage) {
  return lora_setup(config.lora, config.sources, stage.text(), TrainingBackend::Cpu, &stage);
}

size_t count_tower(const models::LoraSetup& lora) {
  return static_cast<size_t>(std::count_if(lora.adapters.begin(), lora.adapters.end(), is_vision_tower_adapter));
}

TEST(VisionTowerLora, AllLinearReachesTheTowerAndTheMergerWithTransformersModulePath) {
  const Config config = tower_config(false);
  const auto stage = vision_stage(config);
  ASSERT_TRUE(stage->trains_tower());
  const models::LoraSetup lora = setup_for(config, *stage);
  const int64_t layers = stage->text().num_hidden_layers;
  const int64_t depth = std::get<models::VisionModelConfig>(stage->model()).vision.depth;
  EXPECT_EQ(lora.adapters.size(), static_cast<size_t>(7 * layers + 5 * depth + 2));
  EXPECT_EQ(count_tower(lora), static_cast<size_t>(5 * depth + 2));
  EXPECT_EQ(lora.options.target_modules,
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                      "qkv", "proj", "mlp.0", "mlp.2"}));
  // The text model's first, then the tower's in parameter order.
  EXPECT_EQ(lora.adapters.front().a.hf_name,
            "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight");
  const auto first_tower = std::find_if(lora.adapters.begin(), lora.adapters.end(), is_vision_tower_adapter);
  ASSERT_NE(first_tower, lora.adapters.end());
  EXPECT_EQ(first_tower->base.name, "visual.blocks.0.attn.qkv.weight");
  EXPECT_EQ(first_tower->a.name, "visual.blocks.0.attn.qkv.lora_A.weight");
  EXPECT_EQ(first_tower->a.hf_name, "base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight");
  EXPECT_EQ(first_tower->b.hf_name, "base_model.model.model.visual.blocks.0.attn.qkv.lora_B.weight");
  EXPECT_EQ(first_tower->a.shape, (graph::Shape{lora.options.rank, first_tower->base.shape[1]}));
  EXPECT_EQ(lora.adapters.back().b.hf_name, "base_model.model.model.visual.merger.mlp.2.lora_B.weight");
  for (const models::LoraAdapter& adapter : lora.adapters) {
    EXPECT_EQ(adapter.base.name.find("patch_embed"), std::string::npos) << adapter.base.name;
  }
  EXPECT_EQ(exclusion(*stage, lora), ".*visual\\.patch_embed.*");
}

// A name shared by the text model and the tower adapts both (PEFT's suffix match); a tower-only
// name adapts the tower only.
TEST(VisionTowerLora, NamedModulesAdaptEveryModuleOfThatName) {
  Config config = tower_config(false);
  const auto stage = vision_stage(config);
  const int64_t layers = stage->text().num_hidden_layers;
  const int64_t depth = std::get<models::VisionModelConfig>(stage->model()).vision.depth;
  config.lora.lora_target_modules = {"gate_proj"};
  models::LoraSetup lora = setup_for(config, *stage);
  EXPECT_EQ(lora.adapters.size(), static_cast<size_t>(layers + depth));
  EXPECT_EQ(count_tower(lora), static_cast<size_t>(depth));
  config.lora.lora_target_modules = {"proj", "mlp.0"};
  lora = setup_for(config, *stage);
  EXPECT_EQ(lora.adapters.size(), static_cast<size_t>(depth + 1));
  EXPECT_EQ(count_tower(lora), lora.adapters.size());
  EXPECT_EQ(lora.adapters.back().base.name, "visual.merger.mlp.0.weight");
  // Only the text model adapted: PEFT must still leave the tower alone.
  config.lora.lora_target_modules = {"q_proj"};
  lora = setup_for(config, *stage);
  EXPECT_EQ(count_tower(lora), 0u);
  EXPECT_EQ(exclusion(*stage, lora), ".*visual.*");
}

TEST(VisionTowerLora, AFrozenTowerTakesNoAdaptersAndRefusesItsModuleNames) {
  Config config = tower_config(true);
  const auto stage = vision_stage(config);
  EXPECT_FALSE(stage->trains_tower());
  EXPECT_TRUE(stage->tower_lora_modules().empty());
  EXPECT_EQ(count_tower(setup_for(config, *stage)), 0u);
  config.lora.lora_target_modules = {"q_proj", "qkv"};
  try {
    setup_for(config, *stage);
    FAIL() << "qkv accepted with the tower frozen";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("'qkv' is not a linear layer of this model"), std::string::npos)
        << error.what();
  }
}

// freeze_vision: false makes every tower parameter trainable in the graph (full fine-tuning);
// the LoRA rewrite then freezes them and adds the tower's adapters.
TEST(VisionTowerLora, TheGraphsTowerIsTrainableAndLoraAdaptsIt) {
  const Config config = tower_config(false);
  const auto stage = vision_stage(config);
  stage->set_plan_patches(16, 1);
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options;
  options.batch = 1;
  options.sequence = 8;
  const models::DecoderGraph graph = stage->build_graph(registry, options);
  int tower = 0;
  for (graph::TensorId id : graph.graph.parameters) {
    const graph::TensorInfo& tensor = graph.graph.tensors[static_cast<size_t>(id)];
    if (tensor.name.rfind("visual.", 0) != 0) continue;
    EXPECT_TRUE(tensor.trainable) << tensor.name;
    ++tower;
  }
  EXPECT_EQ(static_cast<size_t>(tower), stage->specs().size() - models::vision_model_text_parameters(
                                                                     stage->text(), config.model.name_or_path)
                                                                     .size());
  const models::LoraSetup lora = setup_for(config, *stage);
  const graph::Graph adapted = models::apply_lora(graph.graph, registry, lora.adapters, lora.options, true);
  size_t trainable_tower = 0;
  for (graph::TensorId id : adapted.parameters) {
    const graph::TensorInfo& tensor = adapted.tensors[static_cast<size_t>(id)];
    if (tensor.trainable && tensor.name.rfind("visual.", 0) == 0) {
      EXPECT_NE(tensor.name.find(".lora_"), std::string::npos) << tensor.name;
      ++trainable_tower;
    }
  }
  EXPECT_EQ(trainable_tower, 2 * count_tower(lora));
}

// Qwen3-VL (vision/qwen3_vl_model: DeepStack mergers): all-linear reaches every block's qkv, proj,
// linear_fc1 and linear_fc2, the merger's and each DeepStack merger's linear_fc1 / linear_fc2 (the
// names they share with the blocks' MLPs), never the patch embedding or the position embedding.
TEST(VisionTowerLora, Qwen3VLAllLinearReachesTheBlocksTheMergerAndTheDeepStackMergers) {
  const Config config = tower_config(false, "qwen3_vl_model");
  const auto stage = vision_stage(config);
  ASSERT_TRUE(stage->trains_tower());
  const models::Qwen3VisionTowerConfig& vision = std::get<models::Qwen3VLModelConfig>(stage->model()).vision;
  const auto deepstack = static_cast<int64_t>(vision.deepstack_visual_indexes.size());
  ASSERT_GT(deepstack, 0);
  const models::LoraSetup lora = setup_for(config, *stage);
  const int64_t layers = stage->text().num_hidden_layers;
  EXPECT_EQ(lora.options.target_modules,
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                      "qkv", "proj", "linear_fc1", "linear_fc2"}));
  EXPECT_EQ(count_tower(lora), static_cast<size_t>(4 * vision.depth + 2 * deepstack + 2));
  EXPECT_EQ(lora.adapters.size(), static_cast<size_t>(7 * layers) + count_tower(lora));
  std::vector<std::string> bases;
  for (const models::LoraAdapter& adapter : lora.adapters) {
    if (!is_vision_tower_adapter(adapter)) continue;
    bases.push_back(adapter.base.name);
    EXPECT_EQ(adapter.base.name.find("patch_embed"), std::string::npos) << adapter.base.name;
    EXPECT_EQ(adapter.base.name.find("pos_embed"), std::string::npos) << adapter.base.name;
  }
  const auto has = [&](const std::string& name) { return std::find(bases.begin(), bases.end(), name) != bases.end(); };
  EXPECT_TRUE(has("visual.blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(has("visual.blocks.0.mlp.linear_fc2.weight"));
  EXPECT_TRUE(has("visual.merger.linear_fc1.weight"));
  EXPECT_TRUE(has(fmt::format("visual.deepstack_merger_list.{}.linear_fc2.weight", deepstack - 1)));
  const auto merger = std::find_if(lora.adapters.begin(), lora.adapters.end(), [](const models::LoraAdapter& a) {
    return a.base.name == "visual.deepstack_merger_list.0.linear_fc1.weight";
  });
  ASSERT_NE(merger, lora.adapters.end());
  EXPECT_EQ(merger->a.hf_name, "base_model.model.model.visual.deepstack_merger_list.0.linear_fc1.lora_A.weight");
  EXPECT_EQ(merger->a.shape, (graph::Shape{lora.options.rank, vision.hidden_size * vision.merge_unit()}));
  EXPECT_EQ(exclusion(*stage, lora), ".*visual\\.patch_embed.*");
  // linear_fc1 alone: each block's MLP, the merger's and every DeepStack merger's.
  Config named = config;
  named.lora.lora_target_modules = {"linear_fc1"};
  EXPECT_EQ(setup_for(named, *stage).adapters.size(), static_cast<size_t>(vision.depth + deepstack + 1));
}

// The Qwen3-VL graph with freeze_vision: false: every tower parameter (the position embedding and
// the DeepStack mergers' among them) trainable; frozen, none.
TEST(VisionTowerLora, Qwen3VLGraphsTowerIsTrainableOnlyWhenAsked) {
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions options;
  options.batch = 1;
  options.sequence = 8;
  for (const bool freeze : {false, true}) {
    const auto stage = vision_stage(tower_config(freeze, "qwen3_vl_model"));
    EXPECT_TRUE(stage->tower_lora_modules().empty() == freeze);
    stage->set_plan_patches(16, 1);
    const models::DecoderGraph graph = stage->build_graph(registry, options);
    size_t tower = 0, trainable = 0;
    for (graph::TensorId id : graph.graph.parameters) {
      const graph::TensorInfo& tensor = graph.graph.tensors[static_cast<size_t>(id)];
      if (tensor.name.rfind("visual.", 0) != 0) continue;
      ++tower;
      trainable += tensor.trainable ? 1 : 0;
    }
    EXPECT_EQ(tower, vision_tower_parameter_list(stage->model()).size());
    EXPECT_EQ(trainable, freeze ? 0u : tower) << freeze;
  }
}

}  // namespace
}  // namespace surogate::train
