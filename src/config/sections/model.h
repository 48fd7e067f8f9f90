// Configuration section: the model to train and the shape it is trained at.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config_enums.h"

namespace surogate::config {

struct Model {
  std::string name_or_path;  // the option `model`
  std::optional<std::string> model_type;
  // Addition: a JSON IR file (docs/architecture.md) that replaces the built-in graph builder
  // (models/model_definition.h); the Python DSL writes such files.
  std::optional<std::string> model_definition;
  std::optional<int64_t> sequence_len;              // the model's max when unset
  std::optional<int64_t> max_model_len;
  std::optional<std::string> rope_scaling;
  std::optional<TorchDtype> torch_dtype;            // from the model config when unset
  bool init_projections_to_zero = false;
  // Addition: a vision-language model's vision tower and merger stay frozen (docs/vision.md);
  // false trains them (full fine-tuning) or lets lora_target_modules reach them (LoRA).
  bool freeze_vision = true;
};

}  // namespace surogate::config
