// LoRA reaching a vision-language model's tower and its mergers (freeze_vision: false,
// docs/vision.md): the tower's adaptable linear layers under the module names PEFT matches, the
// adapters on the ones lora_target_modules names, and adapter_config.json's exclude_modules so that
// PeftModel.from_pretrained puts adapters exactly where the run does.
//
// PEFT matches a listed target module by the module path's suffix (".qkv", ".gate_proj", ".mlp.0",
// ".linear_fc1"), so a name shared by several modules adapts them all, as here: Qwen2.5-VL's
// gate_proj / up_proj / down_proj adapt the text model's and the tower's, Qwen3-VL's linear_fc1 /
// linear_fc2 the blocks' MLPs, the merger and every DeepStack merger. "proj" would also match the
// patch embedding, a Conv3d in transformers (PEFT's all-linear leaves it out), which the run never
// adapts: exclude_modules names it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/lora.h"
#include "train/vision_stage.h"

namespace surogate::train {

// The tower's module names of `model`'s family, in parameter order. Qwen2.5-VL: a block's attn.qkv,
// attn.proj, mlp.gate_proj / up_proj / down_proj, the merger's mlp.0 and mlp.2. Qwen3-VL: a
// block's attn.qkv, attn.proj, mlp.linear_fc1 / linear_fc2, which the merger's and the DeepStack
// mergers' linear_fc1 / linear_fc2 share. All with biases.
const std::vector<std::string>& vision_tower_lora_modules(const VisionLanguageModel& model);

// The adapters on the tower's projections whose module name is in `targets` (others ignored: the
// text model's), in parameter order. Engine names as the tower's parameters
// ("visual.blocks.0.attn.qkv.lora_A.weight"); PEFT keys under transformers' module path
// ("base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight").
std::vector<models::LoraAdapter> vision_tower_lora_adapters(const VisionLanguageModel& model,
                                                            const std::vector<std::string>& targets, int64_t rank);

// Whether `adapter` adapts a tower projection (its base is a visual.* parameter).
bool is_vision_tower_adapter(const models::LoraAdapter& adapter);

// adapter_config.json's exclude_modules for `adapters`: without a tower adapter, every visual
// module (Qwen2.5-VL's tower's gate_proj / up_proj / down_proj share the text model's names); with
// one, the patch embedding only.
void exclude_unadapted_vision_modules(nlohmann::json& adapter_config, const std::vector<models::LoraAdapter>& adapters);

}  // namespace surogate::train
