// Normalizers of tokenizer.json, applied to each piece of text between added tokens before
// pre-tokenization: Unicode forms (NFC, NFD, NFKC, NFKD, via ICU), Prepend, Replace, and
// Sequence (flattened into one list of steps).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/text_growth.h"

namespace surogate::tokenizer {

class JsonPath;

class Normalizer {
 public:
  // A `null` component gives the identity normalizer.
  static Normalizer from_json(const nlohmann::json& component, const JsonPath& where);

  bool empty() const { return steps_.empty(); }
  // How much longer normalize() can make a text (text_growth.h): NFC / NFD 3, NFKC / NFKD 11
  // (UTF-8 bytes of the longest decomposition per byte), Prepend 1 + its length (the text is
  // never empty), Replace the length of its content (a match is at least one byte).
  const TextGrowth& growth() const { return growth_; }
  // Normalizes `text` in place; `scratch` is reused memory.
  void normalize(std::string& text, std::string& scratch, RegexScratch& regex_scratch) const;

 private:
  enum class UnicodeForm { NFC, NFD, NFKC, NFKD };
  struct UnicodeStep {
    UnicodeForm form;
    const void* icu_normalizer;  // icu::Normalizer2*, owned by ICU
  };
  struct PrependStep {
    std::string prefix;
  };
  struct ReplaceStep {
    std::string literal;                 // used when `regex` is empty
    std::shared_ptr<const Regex> regex;  // the Regex pattern form
    std::string content;
  };
  using Step = std::variant<UnicodeStep, PrependStep, ReplaceStep>;

  void append_steps(const nlohmann::json& component, const JsonPath& where);
  std::vector<Step> steps_;
  TextGrowth growth_;
};

// Replaces every non-overlapping occurrence of `pattern` (a literal or a regex) in `text` by
// `content`; shared by the Replace normalizer and the Replace decoder.
void replace_all(std::string& text, const std::string& literal, const Regex* regex,
                 const std::string& content, std::string& scratch, RegexScratch& regex_scratch);

// Reads a `pattern` object {"String": ...} or {"Regex": ...}.
void parse_pattern(const nlohmann::json& pattern, const JsonPath& where, std::string& literal,
                   std::shared_ptr<const Regex>& regex);

}  // namespace surogate::tokenizer
