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

// UserError naming tokenizer_config.json, the key and the token when its eos_token or pad_token is
// not a token of the tokenizer: the pipeline appends and pads with their ids, and without an id
// EOS would silently vanish from every sample. (transformers would add such a token as a new id
// past the vocabulary, which the model's embedding does not cover either.) bos_token and
// unk_token are only ever rendered as text by chat templates, as in transformers, and not checked.
void check_special_tokens_exist(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& tokenizer_dir);

}  // namespace surogate::data
