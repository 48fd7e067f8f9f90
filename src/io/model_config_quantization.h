// config.json's quantization_config. Surogate loads one kind of quantized checkpoint: FP8 with
// block scales, as FP8 model releases save it (DeepSeek-V3, Qwen3-*-FP8, transformers'
// FineGrainedFP8Config):
//   {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
// with each quantized weight `<name>.weight` F8_E4M3 [out, in] beside `<name>.weight_scale_inv`
// [ceil(out/rows), ceil(in/cols)] (quant/fp8_blocks.h). Every other kind (bitsandbytes, GPTQ,
// AWQ, per-tensor FP8, static activation scales, ...) is one UserError naming the key.
// Internal to io/model_config.cpp.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace surogate::io {

// nullopt when `config` has no quantization_config.
std::optional<Fp8BlockCheckpoint> parse_quantization_config(const nlohmann::json& config, const std::string& source);

}  // namespace surogate::io
