// RoPE settings of a config.json, in either spelling (legacy rope_theta + rope_scaling, or the
// rope_parameters object of transformers 5), resolved into a RopeConfig; and the reverse.
// Internal to io/model_config.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace surogate::io {

RopeConfig parse_rope_config(const nlohmann::json& config, int64_t head_dim,
                             int64_t max_position_embeddings, const std::string& source);

// Writes `rope` into `config` in the legacy form, or as rope_parameters when `as_rope_parameters`.
void write_rope_config(const RopeConfig& rope, bool as_rope_parameters, nlohmann::json& config);

}  // namespace surogate::io
