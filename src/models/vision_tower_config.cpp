// VisionTowerConfig from config.json, the tower's parameter list and its weight loading
// (models/vision_tower.h).
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "io/json_fields.h"
#include "models/vision_tower.h"
#include "models/vision_tower_parts.h"

namespace surogate::models {

namespace vision_parts {

nlohmann::json read_vision_config(const std::filesystem::path& config_json) {
  std::ifstream stream(config_json);
  if (!stream) fail_user("{}: not found", config_json.string());
  const nlohmann::json json = nlohmann::json::parse(stream, nullptr, false);
  if (json.is_discarded() || !json.is_object()) fail_user("{}: not a JSON object", config_json.string());
  if (!json.contains("vision_config") || !json["vision_config"].is_object()) {
    fail_user("{}: no vision_config object; the vision tower needs a vision-language model's config", config_json.string());
  }
  return json["vision_config"];
}

void require_rotary_heads(const io::JsonFields& fields, int64_t hidden_size, int64_t num_heads) {
  if (hidden_size % num_heads != 0 || (hidden_size / num_heads) % 4 != 0) {
    fields.fail("num_heads", fmt::format("gives head_dim {} / {}; the 2-D rotary embedding needs a whole head_dim "
                                         "that is a multiple of 4", hidden_size, num_heads));
  }
}

double vision_rope_theta(const nlohmann::json& vision, const std::filesystem::path& config_json, double fallback) {
  if (!vision.contains("rope_parameters") || !vision["rope_parameters"].is_object()) return fallback;
  const io::JsonFields rope(vision["rope_parameters"], config_json.string(), "vision_config.rope_parameters.");
  const std::string type = rope.text("rope_type").value_or("axial");
  if (type != "axial" && type != "default") rope.fail("rope_type", fmt::format("is \"{}\", not axial", type));
  return rope.positive_number_or("rope_theta", fallback);
}

}  // namespace vision_parts

VisionTowerConfig VisionTowerConfig::from_config_json(const std::filesystem::path& config_json) {
  const nlohmann::json vision = vision_parts::read_vision_config(config_json);
  const io::JsonFields fields(vision, config_json.string(), "vision_config.");
  VisionTowerConfig config;
  config.depth = fields.required_positive_integer("depth");
  config.hidden_size = fields.required_positive_integer("hidden_size");
  config.intermediate_size = fields.required_positive_integer("intermediate_size");
  config.num_heads = fields.required_positive_integer("num_heads");
  config.out_hidden_size = fields.required_positive_integer("out_hidden_size");
  // The hub's checkpoints say in_chans, transformers 5 writes in_channels.
  config.in_channels = fields.positive_integer_or("in_channels", fields.positive_integer_or("in_chans", 3));
  config.patch_size = fields.positive_integer_or("patch_size", config.patch_size);
  config.temporal_patch_size = fields.positive_integer_or("temporal_patch_size", config.temporal_patch_size);
  config.spatial_merge_size = fields.positive_integer_or("spatial_merge_size", config.spatial_merge_size);
  config.window_size = fields.positive_integer_or("window_size", config.window_size);
  const std::string act = fields.text("hidden_act").value_or("silu");
  if (act != "silu") fields.fail("hidden_act", fmt::format("is \"{}\"; the Qwen2.5-VL vision MLP is built for silu", act));
  vision_parts::require_rotary_heads(fields, config.hidden_size, config.num_heads);
  if (config.window_size < config.spatial_merge_size * config.patch_size) {
    fields.fail("window_size", fmt::format("is {}, below spatial_merge_size × patch_size = {}", config.window_size,
                                           config.spatial_merge_size * config.patch_size));
  }
  if (vision.contains("fullatt_block_indexes") && !vision["fullatt_block_indexes"].is_null()) {
    const nlohmann::json& list = vision["fullatt_block_indexes"];
    if (!list.is_array()) fields.fail("fullatt_block_indexes", "must be a list of block indices");
    for (const nlohmann::json& index : list) {
      if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= config.depth) {
        fields.fail("fullatt_block_indexes", fmt::format("must hold block indices below depth {}", config.depth));
      }
      config.fullatt_block_indexes.push_back(index.get<int64_t>());
    }
  }
  config.rope_theta = vision_parts::vision_rope_theta(vision, config_json, config.rope_theta);
  return config;
}

std::vector<VisionTowerParameter> vision_tower_parameters(const VisionTowerConfig& config) {
  const int64_t h = config.hidden_size, i = config.intermediate_size, merged = h * config.merge_unit();
  std::vector<VisionTowerParameter> parameters{{"visual.patch_embed.proj.weight", {h, config.patch_columns()}}};
  for (int64_t block = 0; block < config.depth; ++block) {
    const std::string prefix = fmt::format("visual.blocks.{}.", block);
    for (const VisionTowerParameter& parameter : std::vector<VisionTowerParameter>{
             {"norm1.weight", {h}}, {"attn.qkv.weight", {3 * h, h}}, {"attn.qkv.bias", {3 * h}},
             {"attn.proj.weight", {h, h}}, {"attn.proj.bias", {h}}, {"norm2.weight", {h}},
             {"mlp.gate_proj.weight", {i, h}}, {"mlp.gate_proj.bias", {i}}, {"mlp.up_proj.weight", {i, h}},
             {"mlp.up_proj.bias", {i}}, {"mlp.down_proj.weight", {h, i}}, {"mlp.down_proj.bias", {h}}}) {
      parameters.push_back({prefix + parameter.name, parameter.shape});
    }
  }
  parameters.push_back({"visual.merger.ln_q.weight", {h}});
  parameters.push_back({"visual.merger.mlp.0.weight", {merged, merged}});
  parameters.push_back({"visual.merger.mlp.0.bias", {merged}});
  parameters.push_back({"visual.merger.mlp.2.weight", {config.out_hidden_size, merged}});
  parameters.push_back({"visual.merger.mlp.2.bias", {config.out_hidden_size}});
  return parameters;
}

void load_vision_tower_weights(
    const std::filesystem::path& model_dir, const VisionTowerConfig& config,
    const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink) {
  load_visual_weights(model_dir, vision_tower_parameters(config), sink);
}

void load_visual_weights(const std::filesystem::path& model_dir, std::span<const VisionTowerParameter> parameters,
                         const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink) {
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(model_dir);
  for (const VisionTowerParameter& parameter : parameters) {
    const io::SafetensorsTensor* tensor = checkpoint.find(parameter.name);
    if (tensor == nullptr) tensor = checkpoint.find("model." + parameter.name);
    if (tensor == nullptr) {
      fail_user("{}: no tensor {} (nor model.{}); the checkpoint does not hold the vision tower config.json describes",
                model_dir.string(), parameter.name, parameter.name);
    }
    require_float_elements(checkpoint, *tensor, graph::shape_numel(parameter.shape), "config.json's vision_config");
    sink(parameter, *tensor);
  }
}

void require_float_elements(const io::SafetensorsCheckpoint& checkpoint, const io::SafetensorsTensor& tensor,
                            int64_t elements, std::string_view what) {
  if (tensor.element_count() != elements || !dtype_is_floating(tensor.dtype)) {
    fail_user("{}: tensor {} is {} {}, but {} implies a float tensor of {} elements",
              checkpoint.file_of(tensor.name).string(), tensor.name, dtype_safetensors_name(tensor.dtype),
              graph::format_shape(tensor.shape), what, elements);
  }
}

}  // namespace surogate::models
