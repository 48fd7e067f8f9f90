// A model folder's own generation settings, as transformers' generate() takes them: from
// generation_config.json when the folder has one, else from config.json (transformers'
// GenerationConfig.from_model_config); the EOS ids from generation_config.json's eos_token_id,
// else config.json's. A key that is absent or null keeps transformers' default (do_sample false,
// temperature 1, top_k 50, top_p 1, min_p off, repetition_penalty 1); max_new_tokens and
// max_length stay unset (transformers would fall back to max_length 20: the caller picks its own
// default). Command-line or request options override these.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generate/sampling.h"

namespace surogate::generate {

struct GenerationDefaults {
  SamplingOptions sampling;
  std::vector<int32_t> eos_token_ids;     // an int or a list in the files; empty when neither says
  std::optional<int64_t> max_new_tokens;  // new tokens after the prompt
  std::optional<int64_t> max_length;      // prompt + new tokens
};

// `base` with the keys of `object` that name a sampling option (do_sample, temperature, top_k,
// top_p, min_p, repetition_penalty; absent or null keeps base's), validated: a UserError names
// `source` and the key for a wrong type or a value out of range. Also for a request's JSON body.
SamplingOptions sampling_options_from_json(const nlohmann::json& object, const std::string& source,
                                           const SamplingOptions& base = {});

// Reads `model_dir/generation_config.json` (optional) and `model_dir/config.json` (required).
// UserError naming the file (and the key) for a missing config.json, JSON that does not parse, a
// key of the wrong type, or a value out of range (sampling.h's validate, a length <= 0, an EOS id
// outside int32 or negative).
GenerationDefaults read_generation_defaults(const std::filesystem::path& model_dir);

// How many new tokens a prompt of `prompt_length` may get: max_new_tokens when set (transformers
// lets it win over max_length), else max_length - prompt_length (at least 0) when set, else none.
std::optional<int64_t> new_token_limit(const GenerationDefaults& defaults, int64_t prompt_length);

}  // namespace surogate::generate
