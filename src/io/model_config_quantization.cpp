// config.json's quantization_config; see model_config_quantization.h.
#include "io/model_config_quantization.h"

#include "core/error.h"

namespace surogate::io {

std::optional<Fp8BlockCheckpoint> parse_quantization_config(const nlohmann::json& config, const std::string& source) {
  const auto found = config.find("quantization_config");
  if (found == config.end() || found->is_null()) return std::nullopt;
  const nlohmann::json& quantization = *found;
  const bool named = quantization.is_object() && quantization.value("quant_method", nlohmann::json()).is_string();
  const std::string method = named ? quantization["quant_method"].get<std::string>() : std::string("unknown");
  if (method != "fp8" || !quantization.contains("weight_block_size")) {
    const char* kind = method == "fp8" ? " without weight_block_size (per-tensor FP8)" : "";
    fail_user("{}: the model is saved quantized (quantization_config, quant_method '{}'{}), which Surogate does "
              "not load; give the full-precision (bf16 / fp16 / fp32) checkpoint — with qlora_bnb: true or "
              "qlora_fp8: true it is quantized on load. Of quantized checkpoints only FP8 with block scales "
              "(quant_method 'fp8' with weight_block_size) loads", source, method, kind);
  }
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

}  // namespace surogate::io
