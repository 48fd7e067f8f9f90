// Public interface of the tokenizer: loads a Hugging Face `tokenizer.json` (+
// `tokenizer_config.json`) and encodes / decodes exactly as the HF `tokenizers` library does for
// byte-level BPE (GPT-2, Llama 3, Qwen2/3) and SentencePiece-style BPE with byte fallback (Llama 2,
// Mistral).
//
// UTF-8 contract: every `std::string_view` text is taken as UTF-8. Invalid byte sequences are
// replaced by U+FFFD (one per maximal invalid subpart, as Python's `bytes.decode("utf-8",
// "replace")` does) before anything else, so `encode(raw_bytes)` equals HF's
// `encode(raw_bytes.decode("utf-8", "replace"))`. `decode` always returns valid UTF-8.
//
// A Tokenizer is immutable after `load` and safe to use from many threads at once; copies are
// cheap and share the loaded tables.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace surogate::tokenizer {

class TokenizerModel;  // the loaded pipeline (normalizer, pre-tokenizer, BPE, decoders); internal

class Tokenizer {
 public:
  // Reads `dir/tokenizer.json` (required) and `dir/tokenizer_config.json` (optional). Throws
  // UserError naming the file and key when a file is missing, malformed, or uses a component this
  // implementation does not support.
  static Tokenizer load(const std::filesystem::path& dir);
  // Same, from already-read JSON documents; `source_name` names them in error messages.
  static Tokenizer from_json(const nlohmann::json& tokenizer_json,
                             const nlohmann::json& tokenizer_config,
                             const std::string& source_name);
  // The text of a tokenizer.json (no tokenizer_config.json), parsed as load() parses the file:
  // JSON that does not parse is a UserError naming `source_name`, like every other problem.
  static Tokenizer from_text(std::string_view tokenizer_json, const std::string& source_name);

  // Token ids of `text`. With `add_special_tokens`, the post-processor of tokenizer.json adds its
  // special tokens (e.g. Llama 2's `<s>`); special tokens written inside `text` always map to
  // their ids and are never split.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // encode() of every text, on all cores; result[i] belongs to texts[i].
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string>& texts,
                                                 bool add_special_tokens) const;
  // Text of `ids` through the tokenizer.json decoder. Ids outside the vocabulary are skipped.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // One more than the largest id (model vocabulary and added tokens together).
  size_t vocab_size() const;
  bool is_special_token(int32_t id) const;

  // From tokenizer_config.json (`bos_token` etc. may be strings or AddedToken objects there);
  // empty when the config does not name the token.
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }
  const std::optional<std::string>& pad_token() const { return pad_token_; }
  const std::optional<std::string>& unk_token() const { return unk_token_; }
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  // The whole tokenizer_config.json (an empty object when the file is absent); the chat-template
  // renderer reads `chat_template`, `bos_token`, `eos_token` from it.
  const nlohmann::json& config() const { return config_; }
  // `chat_template` from the config when it is a single string template.
  std::optional<std::string> chat_template() const;

 private:
  Tokenizer() = default;

  std::shared_ptr<const TokenizerModel> model_;
  nlohmann::json config_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
  std::optional<std::string> pad_token_;
  std::optional<std::string> unk_token_;
};

}  // namespace surogate::tokenizer
