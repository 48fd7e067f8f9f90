// config.json's mixture-of-experts keys; see model_config_moe.h.
#include "io/model_config_moe.h"

#include <algorithm>

#include <fmt/format.h>

namespace surogate::io {
namespace {

using nlohmann::json;

struct MoeDefaults {
  int64_t experts, experts_per_token, expert_intermediate_size, shared_expert_intermediate_size;
};

// transformers' Qwen2MoeConfig, Qwen3MoeConfig and MixtralConfig defaults.
MoeDefaults defaults(Architecture architecture) {
  switch (architecture) {
    case Architecture::Qwen2Moe:
      return {60, 4, 1408, 5632};
    case Architecture::Qwen3Moe:
      return {128, 8, 768, 0};
    default:
      return {8, 2, 0, 0};  // Mixtral: the experts have intermediate_size
  }
}

std::vector<int64_t> parse_layer_list(const json& config, const JsonFields& fields, std::string_view key, int64_t layers) {
  std::vector<int64_t> list;
  auto found = config.find(std::string(key));
  if (found == config.end() || found->is_null()) return list;
  if (!found->is_array()) fields.fail(key, "must be a list of layer indices");
  for (const json& item : *found) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() >= layers) {
      fields.fail(key, fmt::format("must hold layer indices in [0, {}) (num_hidden_layers)", layers));
    }
    list.push_back(item.get<int64_t>());
  }
  return list;
}

}  // namespace

bool is_moe_architecture(Architecture architecture) {
  return architecture == Architecture::Qwen2Moe || architecture == Architecture::Qwen3Moe ||
         architecture == Architecture::Mixtral;
}

std::optional<MoeConfig> parse_moe_config(const json& config, const JsonFields& fields, Architecture architecture,
                                          int64_t layers, int64_t intermediate_size) {
  if (!is_moe_architecture(architecture)) return std::nullopt;
  const MoeDefaults fallback = defaults(architecture);
  MoeConfig moe;
  const bool mixtral = architecture == Architecture::Mixtral;
  // Both spellings; num_experts wins for the Qwen models (their own key), num_local_experts for Mixtral.
  std::string_view count_key = mixtral ? "num_local_experts" : "num_experts";
  if (!fields.has(count_key)) count_key = mixtral ? "num_experts" : "num_local_experts";
  const std::optional<int64_t> count = fields.integer(count_key);
  moe.experts = count.value_or(fallback.experts);
  if (moe.experts < 0 || (mixtral && moe.experts == 0)) {
    fields.fail(count_key, mixtral ? "must be positive" : "must not be negative");
  }
  moe.experts_per_token = fields.positive_integer_or("num_experts_per_tok", fallback.experts_per_token);
  if (moe.experts > 0 && moe.experts_per_token > moe.experts) {
    fields.fail("num_experts_per_tok", fmt::format("({}) must not exceed the number of experts ({})",
                                                   moe.experts_per_token, moe.experts));
  }
  moe.expert_intermediate_size = mixtral ? intermediate_size
                                         : fields.positive_integer_or("moe_intermediate_size", fallback.expert_intermediate_size);
  moe.normalize_top_k = mixtral || fields.boolean("norm_topk_prob").value_or(false);
  if (architecture == Architecture::Qwen2Moe) {
    moe.shared_expert_intermediate_size =
        fields.positive_integer_or("shared_expert_intermediate_size", fallback.shared_expert_intermediate_size);
  }
  moe.output_router_logits = fields.boolean("output_router_logits").value_or(false);
  moe.router_aux_loss_coef = fields.number("router_aux_loss_coef").value_or(0.001);
  if (!(moe.router_aux_loss_coef >= 0.0)) fields.fail("router_aux_loss_coef", "must not be negative");
  if (mixtral) {
    if (fields.number("router_jitter_noise").value_or(0.0) != 0.0) {
      fields.fail("router_jitter_noise", "is not 0; Surogate does not add router jitter noise: set it to 0.0");
    }
    moe.sparse_layers.assign(static_cast<size_t>(layers), true);
    return moe;
  }
  moe.decoder_sparse_step = fields.integer("decoder_sparse_step").value_or(1);
  if (moe.decoder_sparse_step < 1) fields.fail("decoder_sparse_step", "must be a positive integer");
  moe.mlp_only_layers = parse_layer_list(config, fields, "mlp_only_layers", layers);
  moe.sparse_layers.assign(static_cast<size_t>(layers), false);
  for (int64_t layer = 0; layer < layers; ++layer) {
    const bool dense = std::find(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), layer) != moe.mlp_only_layers.end();
    moe.sparse_layers[static_cast<size_t>(layer)] =
        !dense && moe.experts > 0 && (layer + 1) % moe.decoder_sparse_step == 0;
  }
  return moe;
}

void write_moe_config(const MoeConfig& moe, Architecture architecture, json& config) {
  const bool mixtral = architecture == Architecture::Mixtral;
  std::string count_key = mixtral ? "num_local_experts" : "num_experts";
  if (!config.contains(count_key) && config.contains(mixtral ? "num_experts" : "num_local_experts")) {
    count_key = mixtral ? "num_experts" : "num_local_experts";
  }
  config[count_key] = moe.experts;
  config["num_experts_per_tok"] = moe.experts_per_token;
  config["output_router_logits"] = moe.output_router_logits;
  config["router_aux_loss_coef"] = moe.router_aux_loss_coef;
  if (mixtral) return;
  config["moe_intermediate_size"] = moe.expert_intermediate_size;
  config["norm_topk_prob"] = moe.normalize_top_k;
  config["decoder_sparse_step"] = moe.decoder_sparse_step;
  config["mlp_only_layers"] = moe.mlp_only_layers;
  if (architecture == Architecture::Qwen2Moe) {
    config["shared_expert_intermediate_size"] = moe.shared_expert_intermediate_size;
  }
}

}  // namespace surogate::io
