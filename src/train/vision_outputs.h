// A vision-language folder's trained or merged model written as a Hugging Face folder that
// transformers loads (Qwen2_5_VLForConditionalGeneration or Qwen3VLForConditionalGeneration
// .from_pretrained): what `lora: false`, merge_adapter and `surogate merge` write for either family's
// folder (docs/vision.md).
//
// The folder is the source folder with the text model's weights replaced: config.json, the
// processor files, generation_config.json and the tokenizer files copied as they are; each text
// tensor under the source checkpoint's name and in its dtype; the vision tower, under the source's
// names, dtypes and shapes (the patch embedding's 5-D Conv3d weight as stored, not the graph's 2-D
// one; Qwen3-VL's position embedding and DeepStack mergers among them): copied from the source
// checkpoint byte for byte when frozen, else written from the trained (or merged) weights.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "models/model_spec.h"
#include "io/model_config.h"
#include "models/vision_tower.h"
#include "train/checkpoint_io.h"

namespace surogate::train {

// The processor files a vision-language folder holds beside the tokenizer's.
std::span<const char* const> vision_processor_file_names();

// The module path PEFT names a text parameter by: transformers builds the text model as
// model.language_model.* (since 4.52) whatever the checkpoint's layout (the hub's model.*).
std::string vision_peft_module_path(const std::string& checkpoint_name);

// `text`: the folder's text decoder; `tower`: its tower's parameters (models::vision_tower_parameters
// or models::qwen3_vision_tower_parameters); `text_specs` / `text_weights`: the text model's
// parameters (models::vision_model_text_parameters, hf_name the checkpoint's), fp32. `tower_weights`:
// empty (the tower copied from the source), or the tower's in `tower`'s order, fp32. A source tensor
// in a dtype other than float32 / bfloat16 / float16 is a UserError naming it.
void save_vision_model(const std::filesystem::path& output_dir, const std::filesystem::path& source_model_dir,
                       const io::ModelConfig& text, std::span<const models::VisionTowerParameter> tower,
                       std::span<const models::ParameterSpec> text_specs, std::span<const WeightView> text_weights,
                       std::span<const WeightView> tower_weights = {});

}  // namespace surogate::train
