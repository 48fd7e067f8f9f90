#include "train/lora_targets.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace surogate::train {

const std::vector<std::string>& decoder_linear_modules() {
  static const std::vector<std::string> modules = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};
  return modules;
}

std::vector<std::string> resolve_lora_targets(const std::vector<std::string>& requested) {
  return resolve_lora_targets(requested, decoder_linear_modules());
}

std::vector<std::string> resolve_lora_targets(const std::vector<std::string>& requested,
                                              const std::vector<std::string>& known) {
  std::vector<std::string> all_linear;
  for (const std::string& module : known) {
    if (module != "gate" && module != "shared_expert_gate") all_linear.push_back(module);
  }
  if (requested.empty()) {
    fail_user("lora_target_modules is empty: list projections ({}) or use [all-linear]", fmt::join(known, ", "));
  }
  std::vector<std::string> resolved;
  for (const auto& name : requested) {
    if (name == "all-linear") {
      for (const std::string& module : all_linear) {
        if (std::find(resolved.begin(), resolved.end(), module) == resolved.end()) resolved.push_back(module);
      }
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      fail_user("lora_target_modules: '{}' is not a linear layer of this model; use all-linear or any of: {}", name,
                fmt::join(known, ", "));
    }
    if (std::find(resolved.begin(), resolved.end(), name) == resolved.end()) resolved.push_back(name);
  }
  // Keep the canonical order so outputs are stable whatever order the user wrote.
  std::vector<std::string> ordered;
  for (const auto& name : known) {
    if (std::find(resolved.begin(), resolved.end(), name) != resolved.end()) ordered.push_back(name);
  }
  return ordered;
}

nlohmann::json peft_adapter_config(const LoraSettings& settings, const std::string& base_model) {
  return {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", settings.rank},
      {"lora_alpha", settings.alpha},
      {"lora_dropout", settings.dropout},
      {"target_modules", settings.target_modules},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"revision", nullptr},
  };
}

std::string peft_lora_tensor_name(int layer, const std::string& module, char which) {
  const char* block = (module == "gate_proj" || module == "up_proj" || module == "down_proj") ? "mlp" : "self_attn";
  return fmt::format("base_model.model.model.layers.{}.{}.{}.lora_{}.weight", layer, block, module, which);
}

}  // namespace surogate::train
