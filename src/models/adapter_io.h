// PEFT LoRA adapters on disk, and merging one into base weights.
//   adapter_config.json          PEFT's config (peft_type LORA, r, lora_alpha, target_modules, ...)
//   adapter_model.safetensors    lora_A / lora_B per adapted projection, PEFT key names
//                                ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"), F32
// Stacked experts (models/model_spec.h) carry one adapter per expert, as PEFT adapts each
// expert's projection of a transformers 4.x model ("...mlp.experts.3.gate_proj.lora_A.weight").
// Reading accepts any float dtype and checks the whole adapter against the base model before
// anything is merged: every key must be the lora_A / lora_B of a projection of the model, both
// halves present, shapes [r, in] and [out, r]. Merging is W += scaling · B · A with
// scaling = lora_alpha / r (lora_alpha / √r when use_rslora), in fp32.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "models/lora.h"
#include "models/model_spec.h"

namespace surogate::models {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// Writes both files into `dir` (created). `values(adapter_matrix)` returns the fp32 values of an
// adapter matrix (LoraAdapter::a or ::b), shape-product floats.
void save_peft_adapter(const std::filesystem::path& dir, const std::vector<LoraAdapter>& adapters,
                       const std::function<std::span<const float>(const ParameterSpec&)>& values,
                       const nlohmann::json& adapter_config);

struct AdapterMatrices {
  ParameterSpec base;          // the projection of the base model
  std::vector<float> a, b;     // [r, in], [out, r]; stacked experts: [E, r, in], [E, out, r]
  int64_t rank = 0;
};

struct PeftAdapter {
  nlohmann::json config;
  double scaling = 1.0;
  std::vector<AdapterMatrices> matrices;  // in the base model's parameter order
};

// Reads and validates `dir` against the model described by `config`. UserErrors name the file
// and the key.
PeftAdapter load_peft_adapter(const std::filesystem::path& dir, const io::ModelConfig& config);
// The same against `specs`, the base model's parameters whose hf_name is the module path PEFT's
// keys name (parameter_specs(config) above; a vision-language model's text model under the module
// path transformers builds). The matrices' base specs keep their engine names. `other_modules`:
// the module names target_modules may also list for projections of `specs` beyond the decoder's
// (a vision tower's "qkv", "mlp.0"), matched as PEFT matches them, by the module path's suffix.
PeftAdapter load_peft_adapter(const std::filesystem::path& dir, const io::ModelConfig& config,
                              std::span<const ParameterSpec> specs, std::span<const std::string> other_modules = {});

// W += scaling · B · A for every adapted projection. `weights[i]` belongs to `specs[i]`.
void merge_peft_adapter(const PeftAdapter& adapter, std::span<const ParameterSpec> specs,
                        std::span<std::vector<float>> weights);

}  // namespace surogate::models
