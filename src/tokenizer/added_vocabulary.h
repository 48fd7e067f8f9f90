// Added tokens (`added_tokens` of tokenizer.json): matched in the text before the model runs and
// never split. Matching is leftmost-longest; `single_word` rejects matches glued to word
// characters, `lstrip` / `rstrip` swallow the whitespace around a match, `normalized` tokens are
// matched in the normalized text, the others in the raw text; `special` tokens can be skipped
// when decoding.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace surogate::tokenizer {

class JsonPath;
class Normalizer;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of text: an added token (`token_id` >= 0) or plain text for the model (`token_id` < 0).
struct TextSegment {
  uint32_t begin = 0;
  uint32_t end = 0;
  int32_t token_id = -1;
};

// Leftmost-longest literal matcher over a fixed set of strings (a byte trie).
class LiteralMatcher {
 public:
  void add(std::string_view pattern, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // The longest pattern starting at text[position]: its value and length, or value -1.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t position) const;
  // True when some pattern starts with this byte (a quick filter for the scan).
  bool may_start(uint8_t byte) const { return first_bytes_[byte]; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t value = -1;
    size_t depth = 0;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_bytes_[256] = {};
};

class AddedVocabulary {
 public:
  // A token whose content is already in the model vocabulary takes the model's id, as in HF;
  // any other token keeps the id written in the file.
  static AddedVocabulary from_json(const nlohmann::json& added_tokens, const Normalizer& normalizer,
                                   const BpeModel& model, const JsonPath& where);

  // Cuts `text` into added-token and plain segments (HF `find_matches`), matching the raw
  // (`normalized_pass` false) or the normalized (`normalized_pass` true) tokens. Offsets in
  // `segments` are relative to `text`; `segments` is cleared first.
  void split(std::string_view text, bool normalized_pass, std::vector<TextSegment>& segments) const;
  bool has_normalized_tokens() const { return !normalized_matcher_.empty(); }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_by_id(int32_t id) const;
  std::optional<int32_t> find_by_content(std::string_view content) const;
  bool is_special_content(std::string_view content) const;

 private:
  std::vector<AddedToken> tokens_;
  TokenMap content_to_index_;
  std::unordered_map<int32_t, size_t> id_to_index_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_contents_;
  LiteralMatcher raw_matcher_;         // values are indexes into tokens_
  LiteralMatcher normalized_matcher_;  // patterns are the normalized contents
};

}  // namespace surogate::tokenizer
