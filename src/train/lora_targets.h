// Which linear layers get LoRA adapters: the `lora_target_modules` option resolved against the
// projections a decoder layer has, and the PEFT `adapter_config.json` that describes them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::train {

// The linear projections of a Llama / Mistral / Qwen decoder layer, in PEFT's module names.
const std::vector<std::string>& decoder_linear_modules();

// "all-linear" expands to every projection (never lm_head, as PEFT does); explicit names must
// be projections. Throws UserError naming the unknown entry and listing the valid ones.
std::vector<std::string> resolve_lora_targets(const std::vector<std::string>& requested);
// The same against the PEFT module names a model has (models::lora_module_names): MoE models add
// their experts' projections (gate_proj / up_proj / down_proj, Mixtral's w1 / w3 / w2) and the
// routers ("gate", "shared_expert_gate"), which all-linear leaves out (adapting a router moves
// every token's expert choice; name it explicitly to adapt it).
std::vector<std::string> resolve_lora_targets(const std::vector<std::string>& requested,
                                              const std::vector<std::string>& model_modules);

struct LoraSettings {
  int rank = 16;
  int alpha = 32;
  double dropout = 0.05;
  std::vector<std::string> target_modules;  // resolved
};

// LoRA scales the adapter's output by alpha / rank.
inline double lora_scale(const LoraSettings& settings) {
  return static_cast<double>(settings.alpha) / static_cast<double>(settings.rank);
}

// The adapter_config.json PEFT writes for a causal-LM LoRA adapter.
nlohmann::json peft_adapter_config(const LoraSettings& settings, const std::string& base_model);

// PEFT's tensor names for one adapter matrix, e.g.
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
std::string peft_lora_tensor_name(int layer, const std::string& module, char which /* 'A' or 'B' */);

}  // namespace surogate::train
