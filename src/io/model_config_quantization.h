// config.json's quantization_config. Surogate loads two kinds of quantized checkpoint:
// - FP8 with block scales, as FP8 model releases save it (DeepSeek-V3, Qwen3-*-FP8, transformers'
//   FineGrainedFP8Config):
//     {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
//   with each quantized weight `<name>.weight` F8_E4M3 [out, in] beside `<name>.weight_scale_inv`
//   [ceil(out/rows), ceil(in/cols)] (quant/fp8_blocks.h);
// - bitsandbytes 4-bit, as transformers' BitsAndBytesConfig(load_in_4bit=True) saves it:
//     {"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4" | "fp4",
//      "bnb_4bit_use_double_quant": bool, "bnb_4bit_compute_dtype": ..., "bnb_4bit_quant_storage": "uint8"}
//   with each quantized weight stored as packed codes and its quant state (models/bnb_checkpoint.h).
// Every other kind (bitsandbytes 8-bit, GPTQ, AWQ, per-tensor FP8, static activation scales, 4-bit
// codes stored in another dtype, ...) is one UserError naming the key.
// Internal to io/model_config.cpp.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace surogate::io {

struct CheckpointQuantization {
  std::optional<Fp8BlockCheckpoint> fp8_blocks;
  std::optional<Bnb4bitCheckpoint> bnb_4bit;
};

// Both empty when `config` has no quantization_config.
CheckpointQuantization parse_quantization_config(const nlohmann::json& config, const std::string& source);

}  // namespace surogate::io
