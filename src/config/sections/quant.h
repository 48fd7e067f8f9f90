// Configuration section: qLoRA: the frozen base weights stored quantized (FP8, FP4 or bitsandbytes
// NF4).
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>

namespace surogate::config {

struct Quant {
  bool qlora_fp4 = false;
  bool qlora_fp8 = false;
  bool qlora_bnb = false;
  int64_t qlora_block_size = 128;
  int64_t qlora_bnb_block_size = 64;
  bool qlora_bnb_double_quant = true;
  bool qlora_four_over_six = true;
};

}  // namespace surogate::config
