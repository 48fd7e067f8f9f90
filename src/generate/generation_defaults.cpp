// Reads generation_defaults.h's settings with io::JsonFields, whose messages name the file and key.
#include "generate/generation_defaults.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/json_fields.h"

namespace surogate::generate {
namespace {

nlohmann::json read_json_object(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail_user("{}: cannot be read", path.string());
  std::ostringstream text;
  text << stream.rdbuf();
  nlohmann::json document = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) fail_user("{}: not valid JSON", path.string());
  if (!document.is_object()) fail_user("{}: must hold a JSON object", path.string());
  return document;
}

// eos_token_id: one id or a list of ids; nullopt when absent or null.
std::optional<std::vector<int32_t>> eos_ids_of(const nlohmann::json& document,
                                               const io::JsonFields& fields) {
  if (!fields.has("eos_token_id")) return std::nullopt;
  const nlohmann::json& value = document.at("eos_token_id");
  const nlohmann::json list = value.is_array() ? value : nlohmann::json::array({value});
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fields.fail("eos_token_id", "must be a token id (an integer >= 0) or a list of them");
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

std::optional<int64_t> positive_length(const io::JsonFields& fields, const char* key) {
  const std::optional<int64_t> value = fields.integer(key);
  if (value && *value <= 0) fields.fail(key, fmt::format("must be positive (got {})", *value));
  return value;
}

}  // namespace

SamplingOptions sampling_options_from_json(const nlohmann::json& object, const std::string& source,
                                           const SamplingOptions& base) {
  const io::JsonFields fields(object, source);
  SamplingOptions options = base;
  options.do_sample = fields.boolean("do_sample").value_or(options.do_sample);
  options.temperature = fields.number("temperature").value_or(options.temperature);
  options.top_k = fields.integer("top_k").value_or(options.top_k);
  options.top_p = fields.number("top_p").value_or(options.top_p);
  options.min_p = fields.number("min_p").value_or(options.min_p);
  options.repetition_penalty =
      fields.number("repetition_penalty").value_or(options.repetition_penalty);
  try {
    validate(options);
  } catch (const UserError& error) {
    fail_user("{}: {}", source, error.what());
  }
  return options;
}

GenerationDefaults read_generation_defaults(const std::filesystem::path& model_dir) {
  const std::filesystem::path config_path = model_dir / "config.json";
  const std::filesystem::path generation_path = model_dir / "generation_config.json";
  if (!std::filesystem::exists(config_path)) {
    fail_user("{}: not found; the model folder must hold a Hugging Face config.json",
              config_path.string());
  }
  const nlohmann::json config = read_json_object(config_path);
  const bool has_generation_config = std::filesystem::exists(generation_path);
  const nlohmann::json generation =
      has_generation_config ? read_json_object(generation_path) : config;
  const std::string source = (has_generation_config ? generation_path : config_path).string();
  const io::JsonFields fields(generation, source);

  GenerationDefaults defaults;
  defaults.sampling = sampling_options_from_json(generation, source);
  defaults.max_new_tokens = positive_length(fields, "max_new_tokens");
  defaults.max_length = positive_length(fields, "max_length");

  std::optional<std::vector<int32_t>> eos = eos_ids_of(generation, fields);
  if (!eos && has_generation_config)
    eos = eos_ids_of(config, io::JsonFields(config, config_path.string()));
  defaults.eos_token_ids = eos.value_or(std::vector<int32_t>{});
  return defaults;
}

std::optional<int64_t> new_token_limit(const GenerationDefaults& defaults, int64_t prompt_length) {
  if (defaults.max_new_tokens) return defaults.max_new_tokens;
  if (defaults.max_length) return std::max<int64_t>(0, *defaults.max_length - prompt_length);
  return std::nullopt;
}

}  // namespace surogate::generate
