// LoRA on the Qwen2.5-VL tower; see vision_tower_lora.h.
#include "train/vision_tower_lora.h"

#include <algorithm>

namespace surogate::train {
namespace {

constexpr std::string_view kWeight = ".weight";

// PEFT's target-module name of a tower parameter: "qkv" for visual.blocks.N.attn.qkv.weight,
// "mlp.0" for visual.merger.mlp.0.weight; "" for what is not adapted (norms, biases, the patch
// embedding).
std::string tower_module_name(const std::string& parameter) {
  if (!parameter.ends_with(kWeight) || parameter.starts_with("visual.patch_embed.")) return "";
  const std::string stem = parameter.substr(0, parameter.size() - kWeight.size());
  if (stem.starts_with("visual.merger.")) {
    const std::string module = stem.substr(std::string_view("visual.merger.").size());
    return module.starts_with("mlp.") ? module : "";
  }
  const std::string module = stem.substr(stem.rfind('.') + 1);
  const std::vector<std::string>& known = vision_tower_lora_modules();
  return std::find(known.begin(), known.end(), module) != known.end() ? module : "";
}

}  // namespace

const std::vector<std::string>& vision_tower_lora_modules() {
  static const std::vector<std::string> modules = {"qkv", "proj", "gate_proj", "up_proj", "down_proj", "mlp.0", "mlp.2"};
  return modules;
}

std::vector<models::LoraAdapter> vision_tower_lora_adapters(const models::VisionTowerConfig& tower,
                                                            const std::vector<std::string>& targets, int64_t rank) {
  std::vector<models::LoraAdapter> adapters;
  for (const models::VisionTowerParameter& parameter : models::vision_tower_parameters(tower)) {
    const std::string module = tower_module_name(parameter.name);
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
