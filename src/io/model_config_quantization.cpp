// config.json's quantization_config; see model_config_quantization.h.
#include "io/model_config_quantization.h"

#include "core/error.h"

namespace surogate::io {
namespace {

Fp8BlockCheckpoint parse_fp8(const nlohmann::json& quantization, const std::string& source) {
  const nlohmann::json& block = quantization["weight_block_size"];
  if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() || !block[1].is_number_integer() ||
      block[0].get<int64_t>() < 1 || block[1].get<int64_t>() < 1) {
    fail_user("{}: quantization_config.weight_block_size must be two positive integers [rows, cols], got {}", source,
              block.dump());
  }
  const std::string format = quantization.value("fmt", std::string("e4m3"));
  if (format != "e4m3") {
    fail_user("{}: quantization_config.fmt is '{}'; Surogate loads FP8 checkpoints in e4m3 only", source, format);
  }
  const std::string activations = quantization.value("activation_scheme", std::string("dynamic"));
  if (activations != "dynamic") {
    fail_user("{}: quantization_config.activation_scheme is '{}'; Surogate loads FP8 checkpoints with dynamic "
              "activation scaling only (static schemes store activation scales it does not use)", source, activations);
  }
  return Fp8BlockCheckpoint{block[0].get<int64_t>(), block[1].get<int64_t>()};
}

// A boolean key of quantization_config (transformers writes load_in_4bit and _load_in_4bit alike).
bool flag(const nlohmann::json& quantization, const std::string& key, const std::string& source) {
  for (const std::string& name : {key, "_" + key}) {
    const auto found = quantization.find(name);
    if (found == quantization.end() || found->is_null()) continue;
    if (!found->is_boolean()) {
      fail_user("{}: quantization_config.{} must be true or false, got {}", source, name, found->dump());
    }
    return found->get<bool>();
  }
  return false;
}

std::string text(const nlohmann::json& quantization, const std::string& key, const std::string& fallback,
                 const std::string& source) {
  const auto found = quantization.find(key);
  if (found == quantization.end() || found->is_null()) return fallback;
  if (!found->is_string()) fail_user("{}: quantization_config.{} must be a string, got {}", source, key, found->dump());
  return found->get<std::string>();
}

Bnb4bitCheckpoint parse_bitsandbytes(const nlohmann::json& quantization, const std::string& source) {
  if (flag(quantization, "load_in_8bit", source)) {
    fail_user("{}: the model is saved in bitsandbytes 8-bit (quantization_config.load_in_8bit, LLM.int8), which "
              "Surogate does not load; give the full-precision checkpoint or a bitsandbytes 4-bit one", source);
  }
  if (!flag(quantization, "load_in_4bit", source)) {
    fail_user("{}: quantization_config has quant_method 'bitsandbytes' without load_in_4bit: true; Surogate loads "
              "bitsandbytes 4-bit checkpoints only: give the full-precision checkpoint or fix config.json", source);
  }
  Bnb4bitCheckpoint checkpoint;
  checkpoint.quant_type = text(quantization, "bnb_4bit_quant_type", "fp4", source);  // bitsandbytes' default
  if (checkpoint.quant_type != "nf4" && checkpoint.quant_type != "fp4") {
    fail_user("{}: quantization_config.bnb_4bit_quant_type is '{}'; bitsandbytes 4-bit is 'nf4' or 'fp4'", source,
              checkpoint.quant_type);
  }
  checkpoint.double_quant = flag(quantization, "bnb_4bit_use_double_quant", source);
  const std::string storage = text(quantization, "bnb_4bit_quant_storage", "uint8", source);
  if (storage != "uint8") {
    fail_user("{}: quantization_config.bnb_4bit_quant_storage is '{}'; Surogate loads 4-bit codes stored as uint8 "
              "(bitsandbytes' default) only", source, storage);
  }
  return checkpoint;
}

}  // namespace

CheckpointQuantization parse_quantization_config(const nlohmann::json& config, const std::string& source) {
  const auto found = config.find("quantization_config");
  if (found == config.end() || found->is_null()) return {};
  const nlohmann::json& quantization = *found;
  const bool named = quantization.is_object() && quantization.value("quant_method", nlohmann::json()).is_string();
  const std::string method = named ? quantization["quant_method"].get<std::string>() : std::string("unknown");
  if (method == "bitsandbytes") return {std::nullopt, parse_bitsandbytes(quantization, source)};
  if (method != "fp8" || !quantization.contains("weight_block_size")) {
    const char* kind = method == "fp8" ? " without weight_block_size (per-tensor FP8)" : "";
    fail_user("{}: the model is saved quantized (quantization_config, quant_method '{}'{}), which Surogate does "
              "not load; give the full-precision (bf16 / fp16 / fp32) checkpoint — with qlora_bnb, qlora_fp8 or "
              "qlora_fp4: true it is quantized on load. Of quantized checkpoints FP8 with block scales (quant_method "
              "'fp8' with weight_block_size) and bitsandbytes 4-bit load", source, method, kind);
  }
  return {parse_fp8(quantization, source), std::nullopt};
}

}  // namespace surogate::io
