// See vocabulary_check.h.
#include "data/vocabulary_check.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace surogate::data {

std::optional<ModelVocabulary> read_model_vocabulary(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  std::ifstream stream(path);
  if (!stream) return std::nullopt;
  const nlohmann::json config = nlohmann::json::parse(stream, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::nullopt;
  auto found = config.find("vocab_size");
  if (found == config.end() || !found->is_number_integer() || found->get<int64_t>() <= 0) return std::nullopt;
  return ModelVocabulary{found->get<int64_t>(), path};
}

void check_tokenizer_fits_model(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& tokenizer_json,
                                const ModelVocabulary& model) {
  const auto tokenizer_size = static_cast<int64_t>(tokenizer.vocab_size());
  if (tokenizer_size <= model.size) return;
  const int32_t largest = static_cast<int32_t>(tokenizer_size - 1);
  const std::string token = tokenizer.id_to_token(largest).value_or("");
  fail_user("{} can produce token ids up to {}{} ({} ids including added tokens), but {} gives vocab_size {}: "
            "the model has no embedding row for ids {} and above, so the tokenizer and the model do not belong "
            "together. Put the tokenizer files that were trained with this model next to its config.json, or, "
            "training from scratch, set vocab_size in {} to at least {}",
            tokenizer_json.string(), largest, token.empty() ? "" : fmt::format(" ('{}')", token), tokenizer_size,
            model.config_json.string(), model.size, model.size, model.config_json.string(), tokenizer_size);
}

void check_special_tokens_exist(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& tokenizer_dir) {
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {{"eos_token", &tokenizer.eos_token()},
                                                                              {"pad_token", &tokenizer.pad_token()}};
  for (const auto& [key, token] : tokens) {
    if (!*token || tokenizer.token_to_id(**token)) continue;
    fail_user("{}: {} '{}' is not a token of {}, so it has no id: {} would be left out of every sample. Set {} to a "
              "token the tokenizer has (an added or vocabulary token), or remove the key",
              (tokenizer_dir / "tokenizer_config.json").string(), key, **token,
              (tokenizer_dir / "tokenizer.json").string(),
              std::string_view(key) == "eos_token" ? "the end-of-sequence token" : "padding", key);
  }
}

}  // namespace surogate::data
