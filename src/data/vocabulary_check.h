// The one check that a tokenizer and a model belong together: every token id the tokenizer can
// produce must index a row of the model's embedding (config.json's vocab_size). Without it a
// mismatched pair (say a Qwen tokenizer beside a 35-token model) tokenizes fine and then fails
// deep inside the embedding op. load_text_tools (data/pipeline.h) runs it whenever the settings
// know the model's vocab_size, so `surogate sft|pt` (training and --dry-run), `tokenize`,
// `preview` and `eval` all report the mismatch the same way, before anything is tokenized.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace surogate::tokenizer {
class Tokenizer;
}

namespace surogate::data {

// config.json's vocab_size and where it was read from.
struct ModelVocabulary {
  int64_t size = 0;
  std::filesystem::path config_json;
};

// `model_dir/config.json`'s vocab_size; nullopt when the file is absent (a tokenizer-only folder)
// or does not hold a positive integer vocab_size (the model config loader, io/model_config.h,
// reports that wherever the model itself is loaded).
std::optional<ModelVocabulary> read_model_vocabulary(const std::filesystem::path& model_dir);

// UserError naming `tokenizer_json` and the model's config.json, the largest id the tokenizer can
// produce (its vocabulary including added tokens) and vocab_size, and what to do, when that id
// has no embedding row.
void check_tokenizer_fits_model(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& tokenizer_json,
                                const ModelVocabulary& model);

}  // namespace surogate::data
