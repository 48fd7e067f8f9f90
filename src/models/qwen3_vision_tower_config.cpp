// Qwen3VisionTowerConfig from config.json, the tower's parameter list and its weight loading
// (models/qwen3_vision_tower.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "io/json_fields.h"
#include "models/qwen3_vision_tower.h"
#include "models/vision_tower_parts.h"

namespace surogate::models {
namespace {

int64_t whole_square_root(int64_t value) {
  auto root = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(value))));
  while (root * root > value) --root;
  while ((root + 1) * (root + 1) <= value) ++root;
  return root;
}

}  // namespace

int64_t Qwen3VisionTowerConfig::grid_side() const { return whole_square_root(num_position_embeddings); }

Qwen3VisionTowerConfig Qwen3VisionTowerConfig::from_config_json(const std::filesystem::path& config_json) {
  const nlohmann::json vision = vision_parts::read_vision_config(config_json);
  const io::JsonFields fields(vision, config_json.string(), "vision_config.");
  Qwen3VisionTowerConfig config;
  config.depth = fields.required_positive_integer("depth");
  config.hidden_size = fields.required_positive_integer("hidden_size");
  config.intermediate_size = fields.required_positive_integer("intermediate_size");
  config.num_heads = fields.required_positive_integer("num_heads");
  config.out_hidden_size = fields.required_positive_integer("out_hidden_size");
  config.in_channels = fields.positive_integer_or("in_channels", config.in_channels);
  config.patch_size = fields.positive_integer_or("patch_size", config.patch_size);
  config.temporal_patch_size = fields.positive_integer_or("temporal_patch_size", config.temporal_patch_size);
  config.spatial_merge_size = fields.positive_integer_or("spatial_merge_size", config.spatial_merge_size);
  config.num_position_embeddings = fields.positive_integer_or("num_position_embeddings", config.num_position_embeddings);
  if (config.grid_side() * config.grid_side() != config.num_position_embeddings) {
    fields.fail("num_position_embeddings",
                fmt::format("is {}, not a square; the learned position embeddings are a square grid",
                            config.num_position_embeddings));
  }
  config.hidden_act = fields.text("hidden_act").value_or(config.hidden_act);
  if (config.hidden_act != "gelu_pytorch_tanh" && config.hidden_act != "gelu_new" && config.hidden_act != "gelu") {
    fields.fail("hidden_act", fmt::format("is \"{}\"; the Qwen3-VL vision MLP is built for gelu_pytorch_tanh, "
                                          "gelu_new or gelu", config.hidden_act));
  }
  vision_parts::require_rotary_heads(fields, config.hidden_size, config.num_heads);
  if (vision.contains("deepstack_visual_indexes") && !vision["deepstack_visual_indexes"].is_null()) {
    const nlohmann::json& list = vision["deepstack_visual_indexes"];
    if (!list.is_array()) fields.fail("deepstack_visual_indexes", "must be a list of block indices");
    for (const nlohmann::json& index : list) {
      if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= config.depth) {
        fields.fail("deepstack_visual_indexes", fmt::format("must hold block indices below depth {}", config.depth));
      }
      const auto block = index.get<int64_t>();
      // transformers looks each block up with list.index(block): a repeated block would add one
      // merger's output twice, which no checkpoint does.
      if (std::find(config.deepstack_visual_indexes.begin(), config.deepstack_visual_indexes.end(), block) !=
          config.deepstack_visual_indexes.end()) {
        fields.fail("deepstack_visual_indexes", fmt::format("lists block {} twice", block));
      }
      config.deepstack_visual_indexes.push_back(block);
    }
  }
  config.rope_theta = vision_parts::vision_rope_theta(vision, config_json, config.rope_theta);
  return config;
}

std::vector<VisionTowerParameter> qwen3_vision_tower_parameters(const Qwen3VisionTowerConfig& config) {
  const int64_t h = config.hidden_size, i = config.intermediate_size, merged = h * config.merge_unit();
  std::vector<VisionTowerParameter> parameters{{"visual.patch_embed.proj.weight", {h, config.patch_columns()}},
                                               {"visual.patch_embed.proj.bias", {h}},
                                               {"visual.pos_embed.weight", {config.num_position_embeddings, h}}};
  for (int64_t block = 0; block < config.depth; ++block) {
    const std::string prefix = fmt::format("visual.blocks.{}.", block);
    for (const VisionTowerParameter& parameter : std::vector<VisionTowerParameter>{
             {"norm1.weight", {h}}, {"norm1.bias", {h}}, {"attn.qkv.weight", {3 * h, h}}, {"attn.qkv.bias", {3 * h}},
             {"attn.proj.weight", {h, h}}, {"attn.proj.bias", {h}}, {"norm2.weight", {h}}, {"norm2.bias", {h}},
             {"mlp.linear_fc1.weight", {i, h}}, {"mlp.linear_fc1.bias", {i}}, {"mlp.linear_fc2.weight", {h, i}},
             {"mlp.linear_fc2.bias", {h}}}) {
      parameters.push_back({prefix + parameter.name, parameter.shape});
    }
  }
  // The final merger normalises each patch (H) before grouping, the DeepStack mergers the group.
  auto merger = [&](const std::string& prefix, int64_t norm_size) {
    for (const VisionTowerParameter& parameter : std::vector<VisionTowerParameter>{
             {"norm.weight", {norm_size}}, {"norm.bias", {norm_size}}, {"linear_fc1.weight", {merged, merged}},
             {"linear_fc1.bias", {merged}}, {"linear_fc2.weight", {config.out_hidden_size, merged}},
             {"linear_fc2.bias", {config.out_hidden_size}}}) {
      parameters.push_back({prefix + parameter.name, parameter.shape});
    }
  };
  merger("visual.merger.", h);
  for (size_t j = 0; j < config.deepstack_visual_indexes.size(); ++j) {
    merger(fmt::format("visual.deepstack_merger_list.{}.", j), merged);
  }
  return parameters;
}

void load_qwen3_vision_tower_weights(
    const std::filesystem::path& model_dir, const Qwen3VisionTowerConfig& config,
    const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink) {
  load_visual_weights(model_dir, qwen3_vision_tower_parameters(config), sink);
}

}  // namespace surogate::models
