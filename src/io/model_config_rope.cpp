// RoPE parsing following transformers' modeling_rope_utils: `type` is the legacy spelling of
// `rope_type`; yarn and llama3 fall back to max_position_embeddings for
// original_max_position_embeddings; yarn's attention_factor is resolved from mscale /
// mscale_all_dim / factor exactly like _compute_yarn_parameters.
#include "io/model_config_rope.h"

#include <cmath>

#include "core/error.h"
#include "io/json_fields.h"

namespace surogate::io {
namespace {

using nlohmann::json;

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeType parse_type(const std::string& name, const JsonFields& fields, std::string_view key) {
  if (name == "default") return RopeType::Default;
  if (name == "linear") return RopeType::Linear;
  if (name == "dynamic") return RopeType::Dynamic;
  if (name == "yarn") return RopeType::Yarn;
  if (name == "llama3") return RopeType::Llama3;
  fields.fail(key, fmt::format("is '{}', which Surogate does not support (supported: default, linear, "
                               "dynamic, yarn, llama3)", name));
}

}  // namespace

std::string_view rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::Default: return "default";
    case RopeType::Linear: return "linear";
    case RopeType::Dynamic: return "dynamic";
    case RopeType::Yarn: return "yarn";
    case RopeType::Llama3: return "llama3";
  }
  return "default";
}

RopeConfig parse_rope_config(const json& config, int64_t head_dim, int64_t max_position_embeddings,
                             const std::string& source) {
  JsonFields top(config, source);
  const bool has_parameters = top.has("rope_parameters");
  const char* scaling_key = has_parameters ? "rope_parameters" : "rope_scaling";
  json empty = json::object();
  const json& scaling = top.has(scaling_key) ? config.at(scaling_key) : empty;
  if (!scaling.is_object()) top.fail(scaling_key, "must be an object");
  if (has_parameters && !scaling.contains("rope_type") && !scaling.contains("type") &&
      !scaling.contains("rope_theta") && !scaling.empty()) {
    top.fail(scaling_key, "holds per-layer-type RoPE settings, which Surogate does not support for "
                          "these architectures; give one object with rope_type and rope_theta");
  }
  JsonFields fields(scaling, source, std::string(scaling_key) + ".");

  RopeConfig rope;
  rope.theta = fields.has("rope_theta") ? fields.positive_number_or("rope_theta", 10000.0)
                                        : top.positive_number_or("rope_theta", 10000.0);
  if (fields.has("partial_rotary_factor")) {
    rope.partial_rotary_factor = fields.positive_number_or("partial_rotary_factor", 1.0);
    if (rope.partial_rotary_factor > 1.0) fields.fail("partial_rotary_factor", "must be in (0, 1]");
  } else {
    rope.partial_rotary_factor = top.positive_number_or("partial_rotary_factor", 1.0);
    if (rope.partial_rotary_factor > 1.0) top.fail("partial_rotary_factor", "must be in (0, 1]");
  }
  rope.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  rope.rotary_dim -= rope.rotary_dim % 2;
  if (rope.rotary_dim <= 0) {
    top.fail("partial_rotary_factor", "leaves no rotated dimensions; use a larger factor");
  }

  std::string type_name = "default";
  std::string_view type_key = "rope_type";
  if (auto value = fields.text("rope_type")) {
    type_name = *value;
  } else if (auto legacy = fields.text("type")) {
    type_name = *legacy;
    type_key = "type";
  }
  rope.type = parse_type(type_name, fields, type_key);
  rope.original_max_position_embeddings =
      fields.positive_integer_or("original_max_position_embeddings", max_position_embeddings);

  auto required_factor = [&]() {
    std::optional<double> factor = fields.number("factor");
    if (!factor) fields.fail("factor", fmt::format("is missing; rope type '{}' needs it", type_name));
    if (*factor <= 0) fields.fail("factor", "must be positive");
    return *factor;
  };
  switch (rope.type) {
    case RopeType::Default:
      break;
    case RopeType::Linear:
    case RopeType::Dynamic:
      rope.factor = required_factor();
      break;
    case RopeType::Llama3:
      rope.factor = required_factor();
      if (!fields.has("original_max_position_embeddings")) {
        fields.fail("original_max_position_embeddings", "is missing; rope type 'llama3' needs it");
      }
      rope.low_freq_factor = fields.positive_number_or("low_freq_factor", 0.0);
      rope.high_freq_factor = fields.positive_number_or("high_freq_factor", 0.0);
      if (!fields.has("low_freq_factor")) fields.fail("low_freq_factor", "is missing; rope type 'llama3' needs it");
      if (!fields.has("high_freq_factor")) fields.fail("high_freq_factor", "is missing; rope type 'llama3' needs it");
      if (rope.high_freq_factor <= rope.low_freq_factor) {
        fields.fail("high_freq_factor", "must be larger than low_freq_factor");
      }
      break;
    case RopeType::Yarn: {
      if (fields.has("factor")) {
        rope.factor = required_factor();
      } else if (fields.has("original_max_position_embeddings")) {
        rope.factor = static_cast<double>(max_position_embeddings) /
                      static_cast<double>(rope.original_max_position_embeddings);
      } else {
        required_factor();
      }
      rope.beta_fast = fields.positive_number_or("beta_fast", 32.0);
      rope.beta_slow = fields.positive_number_or("beta_slow", 1.0);
      rope.mscale = fields.number("mscale");
      rope.mscale_all_dim = fields.number("mscale_all_dim");
      rope.truncate = fields.boolean("truncate").value_or(true);
      if (auto attention_factor = fields.number("attention_factor")) {
        if (*attention_factor <= 0) fields.fail("attention_factor", "must be positive");
        rope.attention_factor = *attention_factor;
      } else if (rope.mscale.value_or(0.0) != 0.0 && rope.mscale_all_dim.value_or(0.0) != 0.0) {
        rope.attention_factor = yarn_mscale(rope.factor, *rope.mscale) /
                                yarn_mscale(rope.factor, *rope.mscale_all_dim);
      } else {
        rope.attention_factor = yarn_mscale(rope.factor, 1.0);
      }
      break;
    }
  }
  return rope;
}

void write_rope_config(const RopeConfig& rope, bool as_rope_parameters, json& config) {
  json scaling = json::object();
  scaling["rope_type"] = std::string(rope_type_name(rope.type));
  switch (rope.type) {
    case RopeType::Default:
      break;
    case RopeType::Linear:
    case RopeType::Dynamic:
      scaling["factor"] = rope.factor;
      break;
    case RopeType::Llama3:
      scaling["factor"] = rope.factor;
      scaling["low_freq_factor"] = rope.low_freq_factor;
      scaling["high_freq_factor"] = rope.high_freq_factor;
      scaling["original_max_position_embeddings"] = rope.original_max_position_embeddings;
      break;
    case RopeType::Yarn:
      scaling["factor"] = rope.factor;
      scaling["original_max_position_embeddings"] = rope.original_max_position_embeddings;
      scaling["beta_fast"] = rope.beta_fast;
      scaling["beta_slow"] = rope.beta_slow;
      scaling["attention_factor"] = rope.attention_factor;
      if (rope.mscale) scaling["mscale"] = *rope.mscale;
      if (rope.mscale_all_dim) scaling["mscale_all_dim"] = *rope.mscale_all_dim;
      if (!rope.truncate) scaling["truncate"] = false;
      break;
  }
  config.erase("rope_scaling");
  config.erase("rope_parameters");
  config.erase("rope_theta");
  if (as_rope_parameters) {
    scaling["rope_theta"] = rope.theta;
    if (rope.partial_rotary_factor != 1.0) scaling["partial_rotary_factor"] = rope.partial_rotary_factor;
    config.erase("partial_rotary_factor");
    config["rope_parameters"] = scaling;
  } else {
    config["rope_theta"] = rope.theta;
    if (rope.partial_rotary_factor != 1.0) config["partial_rotary_factor"] = rope.partial_rotary_factor;
    config["rope_scaling"] = rope.type == RopeType::Default ? json(nullptr) : scaling;
  }
}

}  // namespace surogate::io
