// Decoders of tokenizer.json: turn the token strings of ids back into text. Supported:
// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence of those, each with HF's
// exact per-token semantics (e.g. ByteFallback turns an invalid <0xNN> run into one U+FFFD per
// byte; Metaspace drops every replacement character of the first token).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/text_growth.h"

namespace surogate::tokenizer {

class JsonPath;

class Decoder {
 public:
  // A `null` component joins tokens with a space, as HF does without a decoder.
  static Decoder from_json(const nlohmann::json& component, const JsonPath& where);
  // The text of `tokens` (consumed). The result is valid UTF-8.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct ByteLevelStep {};
  struct ReplaceStep {
    std::string literal;
    std::shared_ptr<const Regex> regex;
    std::string content;
  };
  struct ByteFallbackStep {};
  struct FuseStep {};
  struct StripStep {
    char32_t content;
    size_t start;
    size_t stop;
  };
  struct MetaspaceStep {
    std::string replacement;
    bool strip_first;
  };
  using Step = std::variant<ByteLevelStep, ReplaceStep, ByteFallbackStep, FuseStep, StripStep,
                            MetaspaceStep>;

  void append_steps(const nlohmann::json& component, const JsonPath& where);
  std::vector<Step> steps_;
  bool configured_ = false;
  TextGrowth growth_;  // of the Replace steps, the only ones that can lengthen a token
};

}  // namespace surogate::tokenizer
