// LoRA on a vision-language model's tower; see vision_tower_lora.h.
#include "train/vision_tower_lora.h"

#include <algorithm>

namespace surogate::train {
namespace {

constexpr std::string_view kWeight = ".weight";

// PEFT's target-module name of a tower parameter, matched as PEFT matches it (the module path's
// suffix): "qkv" for visual.blocks.N.attn.qkv.weight, "mlp.0" for Qwen2.5-VL's
// visual.merger.mlp.0.weight, "linear_fc1" for Qwen3-VL's
// visual.deepstack_merger_list.0.linear_fc1.weight; "" for what is not adapted (norms, biases, the
// position embedding, the patch embedding).
std::string tower_module_name(const std::string& parameter, const std::vector<std::string>& known) {
  if (!parameter.ends_with(kWeight) || parameter.starts_with("visual.patch_embed.")) return "";
  const std::string stem = parameter.substr(0, parameter.size() - kWeight.size());
  const auto found = std::find_if(known.begin(), known.end(),
                                  [&](const std::string& module) { return stem.ends_with("." + module); });
  return found != known.end() ? *found : "";
}

}  // namespace

const std::vector<std::string>& vision_tower_lora_modules(const VisionLanguageModel& model) {
  static const std::vector<std::string> qwen2_5 = {"qkv",       "proj",  "gate_proj", "up_proj",
                                                   "down_proj", "mlp.0", "mlp.2"};
  static const std::vector<std::string> qwen3 = {"qkv", "proj", "linear_fc1", "linear_fc2"};
  return std::holds_alternative<models::Qwen3VLModelConfig>(model) ? qwen3 : qwen2_5;
}

std::vector<models::LoraAdapter> vision_tower_lora_adapters(const VisionLanguageModel& model,
                                                            const std::vector<std::string>& targets, int64_t rank) {
  const std::vector<std::string>& known = vision_tower_lora_modules(model);
  std::vector<models::LoraAdapter> adapters;
  for (const models::VisionTowerParameter& parameter : vision_tower_parameter_list(model)) {
    const std::string module = tower_module_name(parameter.name, known);
    if (module.empty() || std::find(targets.begin(), targets.end(), module) == targets.end()) continue;
    const std::string stem = parameter.name.substr(0, parameter.name.size() - kWeight.size());
    // transformers (4.52 on) builds the tower as model.visual, whatever the checkpoint's layout.
    const std::string peft_path = "model." + parameter.name;
    const int64_t out = parameter.shape[0], in = parameter.shape[1];
    models::LoraAdapter adapter;
    adapter.base = {parameter.name, peft_path, parameter.shape};
    adapter.a = {stem + ".lora_A.weight", models::peft_key(peft_path, 'A'), {rank, in}};
    adapter.b = {stem + ".lora_B.weight", models::peft_key(peft_path, 'B'), {out, rank}};
    adapters.push_back(std::move(adapter));
  }
  return adapters;
}

bool is_vision_tower_adapter(const models::LoraAdapter& adapter) { return adapter.base.name.starts_with("visual."); }

void exclude_unadapted_vision_modules(nlohmann::json& adapter_config, const std::vector<models::LoraAdapter>& adapters) {
  const bool tower = std::any_of(adapters.begin(), adapters.end(), is_vision_tower_adapter);
  // PEFT full-matches a string against each module path (model.visual.patch_embed.proj).
  adapter_config["exclude_modules"] = tower ? ".*visual\\.patch_embed.*" : ".*visual.*";
}

}  // namespace surogate::train
