// Added-token matching. Word characters and whitespace are the Unicode definitions HF's Rust
// `regex` uses for `\w` and `\s` (Alphabetic, marks, decimal digits, connector punctuation,
// Join_Control; White_Space), looked up through ICU.
#include "tokenizer/added_vocabulary.h"

#include <fmt/format.h>
#include <unicode/uchar.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {
namespace {

bool is_word_character(char32_t c) {
  const auto value = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(value, UCHAR_ALPHABETIC) ||
      u_hasBinaryProperty(value, UCHAR_JOIN_CONTROL))
    return true;
  const int8_t category = u_charType(value);
  return category == U_NON_SPACING_MARK || category == U_ENCLOSING_MARK ||
         category == U_COMBINING_SPACING_MARK || category == U_DECIMAL_DIGIT_NUMBER ||
         category == U_CONNECTOR_PUNCTUATION;
}

bool is_white_space(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t length = 0;
  return is_word_character(decode_code_point_before(text, text.size(), length));
}

bool starts_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t length = 0;
  return is_word_character(decode_code_point(text, 0, length));
}

// Start of the whitespace run that ends `text`.
size_t trailing_space_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t length = 0;
    if (!is_white_space(decode_code_point_before(text, end, length))) break;
    end -= length;
  }
  return end;
}

// Length of the whitespace run that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t position = 0;
  while (position < text.size()) {
    size_t length = 0;
    if (!is_white_space(decode_code_point(text, position, length))) break;
    position += length;
  }
  return position;
}

}  // namespace

void LiteralMatcher::add(std::string_view pattern, int32_t value) {
  size_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<uint8_t>(c);
    auto& children = nodes_[node].children;
    auto found = std::lower_bound(children.begin(), children.end(), byte,
                                  [](const auto& child, uint8_t key) { return child.first < key; });
    if (found != children.end() && found->first == byte) {
      node = static_cast<size_t>(found->second);
      continue;
    }
    const auto next = static_cast<int32_t>(nodes_.size());
    const size_t depth = nodes_[node].depth + 1;
    children.insert(found, {byte, next});
    nodes_.push_back(Node{{}, -1, depth});
    node = static_cast<size_t>(next);
  }
  if (nodes_[node].value < 0) nodes_[node].value = value;  // the first of duplicates wins
  if (!pattern.empty()) first_bytes_[static_cast<uint8_t>(pattern[0])] = true;
}

std::pair<int32_t, size_t> LiteralMatcher::longest_at(std::string_view text,
                                                      size_t position) const {
  std::pair<int32_t, size_t> best{-1, 0};
  size_t node = 0;
  for (size_t i = position; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    const auto& children = nodes_[node].children;
    auto found = std::lower_bound(children.begin(), children.end(), byte,
                                  [](const auto& child, uint8_t key) { return child.first < key; });
    if (found == children.end() || found->first != byte) break;
    node = static_cast<size_t>(found->second);
    if (nodes_[node].value >= 0) best = {nodes_[node].value, nodes_[node].depth};
  }
  return best;
}

AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& added_tokens,
                                           const Normalizer& normalizer, const BpeModel& model,
                                           const JsonPath& where) {
  AddedVocabulary vocabulary;
  if (added_tokens.is_null()) return vocabulary;
  if (!added_tokens.is_array()) fail_at(where, "expected a list of added tokens");
  std::string normalized, scratch;
  RegexScratch regex_scratch;
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const nlohmann::json& entry = added_tokens[i];
    const JsonPath at = where.index(i);
    AddedToken token;
    const int64_t id = require_integer(entry, "id", at);
    if (id < 0 || id >= INT32_MAX) fail_at(at.child("id"), "must be a non-negative 32-bit integer");
    token.id = static_cast<int32_t>(id);
    token.content = require_string(entry, "content", at);
    if (!is_valid_utf8(token.content)) fail_at(at.child("content"), "is not valid UTF-8");
    token.single_word = bool_or(entry, "single_word", false, at);
    token.lstrip = bool_or(entry, "lstrip", false, at);
    token.rstrip = bool_or(entry, "rstrip", false, at);
    token.special = bool_or(entry, "special", false, at);
    token.normalized = bool_or(entry, "normalized", !token.special, at);
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    if (auto model_id = model.token_to_id(token.content)) token.id = *model_id;
    const size_t index = vocabulary.tokens_.size();
    if (token.special) vocabulary.special_contents_.insert(token.content);
    vocabulary.content_to_index_.insert_or_assign(token.content, static_cast<int32_t>(index));
    vocabulary.id_to_index_.insert_or_assign(token.id, index);
    if (token.normalized) {
      normalized = token.content;
      normalizer.normalize(normalized, scratch, regex_scratch);
      if (!normalized.empty())
        vocabulary.normalized_matcher_.add(normalized, static_cast<int32_t>(index));
    } else {
      vocabulary.raw_matcher_.add(token.content, static_cast<int32_t>(index));
    }
    vocabulary.tokens_.push_back(std::move(token));
  }
  return vocabulary;
}

const AddedToken* AddedVocabulary::find_by_id(int32_t id) const {
  auto found = id_to_index_.find(id);
  return found == id_to_index_.end() ? nullptr : &tokens_[found->second];
}

std::optional<int32_t> AddedVocabulary::find_by_content(std::string_view content) const {
  auto found = content_to_index_.find(content);
  if (found == content_to_index_.end()) return std::nullopt;
  return tokens_[static_cast<size_t>(found->second)].id;
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
  return special_contents_.find(content) != special_contents_.end();
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass,
                            std::vector<TextSegment>& segments) const {
  segments.clear();
  const LiteralMatcher& matcher = normalized_pass ? normalized_matcher_ : raw_matcher_;
  size_t consumed = 0;  // end of the last emitted segment
  size_t position = 0;
  while (position < text.size() && !matcher.empty()) {
    if (!matcher.may_start(static_cast<uint8_t>(text[position]))) {
      ++position;
      continue;
    }
    const auto [index, length] = matcher.longest_at(text, position);
    if (index < 0) {
      ++position;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t start = position;
    size_t stop = position + length;
    position = stop;  // matches never overlap, accepted or not
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), consumed);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (consumed < start)
      segments.push_back({static_cast<uint32_t>(consumed), static_cast<uint32_t>(start), -1});
    segments.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), token.id});
    consumed = stop;
  }
  if (consumed < text.size()) {
    segments.push_back({static_cast<uint32_t>(consumed), static_cast<uint32_t>(text.size()), -1});
  }
}

}  // namespace surogate::tokenizer
