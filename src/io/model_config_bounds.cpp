// See model_config_bounds.h.
#include "io/model_config_bounds.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace surogate::io {
namespace {

void check_dimension(const JsonFields& fields, std::string_view key, int64_t value) {
  if (value > kMaxModelDimension) {
    fields.fail(key, fmt::format("is {}, larger than any model's (at most {} here); check the value", value,
                                 kMaxModelDimension));
  }
}

}  // namespace

void check_model_size_bounds(const ModelConfig& model, const JsonFields& fields) {
  check_dimension(fields, "vocab_size", model.vocab_size);
  check_dimension(fields, "hidden_size", model.hidden_size);
  check_dimension(fields, "intermediate_size", model.intermediate_size);
  check_dimension(fields, "num_attention_heads", model.num_attention_heads);
  check_dimension(fields, "num_key_value_heads", model.num_key_value_heads);
  check_dimension(fields, "head_dim", model.head_dim);
  if (model.max_position_embeddings > INT32_MAX) {
    fields.fail("max_position_embeddings", fmt::format("is {}, more than the {} positions a sequence can have here",
                                                       model.max_position_embeddings, INT32_MAX));
  }
  if (model.moe) {
    const bool mixtral = model.architecture == Architecture::Mixtral;  // its own key names
    check_dimension(fields, mixtral ? "num_local_experts" : "num_experts", model.moe->experts);
    check_dimension(fields, mixtral ? "intermediate_size" : "moe_intermediate_size",
                    model.moe->expert_intermediate_size);
    check_dimension(fields, "shared_expert_intermediate_size", model.moe->shared_expert_intermediate_size);
  }
  // The parameter count in floating point (it cannot wrap): embeddings (and an untied head),
  // then per layer the attention projections and the MLP or the experts.
  const double hidden = static_cast<double>(model.hidden_size);
  const double attention_width = static_cast<double>(model.num_attention_heads + 2 * model.num_key_value_heads) *
                                 static_cast<double>(model.head_dim);
  const double attention = hidden * (attention_width + static_cast<double>(model.num_attention_heads * model.head_dim));
  double mlp = 3.0 * hidden * static_cast<double>(model.intermediate_size);
  if (model.moe) {
    mlp = std::max(mlp, 3.0 * hidden *
                            (static_cast<double>(model.moe->experts) *
                                 static_cast<double>(model.moe->expert_intermediate_size) +
                             static_cast<double>(model.moe->shared_expert_intermediate_size)));
  }
  const double embeddings = static_cast<double>(model.vocab_size) * hidden * (model.tie_word_embeddings ? 1.0 : 2.0);
  const double parameters = embeddings + static_cast<double>(model.num_hidden_layers) * (attention + mlp);
  if (parameters > kMaxModelParameters) {
    fields.fail("hidden_size", fmt::format("and the other sizes (vocab_size {}, intermediate_size {}, "
                                           "num_hidden_layers {}, heads {} × head_dim {}) describe a model of {:.3g} "
                                           "parameters, more than any machine holds (at most {:.3g} here); check "
                                           "the values",
                                           model.vocab_size, model.intermediate_size, model.num_hidden_layers,
                                           model.num_attention_heads, model.head_dim, parameters, kMaxModelParameters));
  }
}

}  // namespace surogate::io
