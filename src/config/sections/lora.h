// Configuration section: the LoRA adapter.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config_enums.h"

namespace surogate::config {

struct Lora {
  bool enabled = true;  // the option `lora`
  int64_t lora_rank = 16;
  int64_t lora_alpha = 32;
  double lora_dropout = 0.05;
  LoraDtype lora_dtype = LoraDtype::Fp32;
  std::vector<std::string> lora_target_modules = {"all-linear"};
  bool merge_adapter = false;
};

}  // namespace surogate::config
