// Normalizer steps. Unicode forms use ICU's UTF-8 entry points with a quick "already normalized"
// check first, so ASCII and already-NFC text (the common case) is not copied.
#include "tokenizer/normalizer.h"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace surogate::tokenizer {

void parse_pattern(const nlohmann::json& pattern, const JsonPath& where, std::string& literal,
                   std::shared_ptr<const Regex>& regex) {
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    literal = pattern["String"].get<std::string>();
    if (literal.empty())
      fail_at(where.child("String"), "an empty pattern would match everywhere; remove the step");
    return;
  }
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = std::make_shared<const Regex>(
        Regex::compile(pattern["Regex"].get<std::string>(), where.child("Regex")));
    return;
  }
  fail_at(where, "expected {\"String\": ...} or {\"Regex\": ...}");
}

void replace_all(std::string& text, const std::string& literal, const Regex* regex,
                 const std::string& content, std::string& scratch, RegexScratch& regex_scratch) {
  scratch.clear();
  if (regex) {
    std::vector<ByteSpan> matches;
    regex->find_all(text, 0, regex_scratch, matches);
    if (matches.empty()) return;
    size_t position = 0;
    for (const ByteSpan& match : matches) {
      scratch.append(text, position, match.begin - position);
      scratch += content;
      position = match.end;
    }
    scratch.append(text, position, std::string::npos);
  } else {
    size_t found = text.find(literal);
    if (found == std::string::npos) return;
    size_t position = 0;
    while (found != std::string::npos) {
      scratch.append(text, position, found - position);
      scratch += content;
      position = found + literal.size();
      found = text.find(literal, position);
    }
    scratch.append(text, position, std::string::npos);
  }
  text.swap(scratch);
}

Normalizer Normalizer::from_json(const nlohmann::json& component, const JsonPath& where) {
  Normalizer normalizer;
  if (!component.is_null()) normalizer.append_steps(component, where);
  return normalizer;
}

void Normalizer::append_steps(const nlohmann::json& component, const JsonPath& where) {
  const std::string type = component_type(component, where);
  if (type == "Sequence") {
    const nlohmann::json& list = require_field(component, "normalizers", where);
    if (!list.is_array()) fail_at(where.child("normalizers"), "expected a list of normalizers");
    for (size_t i = 0; i < list.size(); ++i)
      append_steps(list[i], where.child("normalizers").index(i));
    return;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* icu_normalizer = nullptr;
    UnicodeForm form = UnicodeForm::NFC;
    if (type == "NFC") icu_normalizer = icu::Normalizer2::getNFCInstance(status);
    if (type == "NFD")
      icu_normalizer = icu::Normalizer2::getNFDInstance(status), form = UnicodeForm::NFD;
    if (type == "NFKC")
      icu_normalizer = icu::Normalizer2::getNFKCInstance(status), form = UnicodeForm::NFKC;
    if (type == "NFKD")
      icu_normalizer = icu::Normalizer2::getNFKDInstance(status), form = UnicodeForm::NFKD;
    if (U_FAILURE(status) || !icu_normalizer) {
      fail_at(where, fmt::format("ICU could not provide the {} normalizer ({}); reinstall libicu",
                                 type, u_errorName(status)));
    }
    steps_.push_back(UnicodeStep{form, icu_normalizer});
    growth_.multiply(form == UnicodeForm::NFKC || form == UnicodeForm::NFKD ? 11 : 3);
    return;
  }
  if (type == "Prepend") {
    steps_.push_back(PrependStep{require_string(component, "prepend", where)});
    growth_.multiply(1 + std::get<PrependStep>(steps_.back()).prefix.size());
    return;
  }
  if (type == "Replace") {
    ReplaceStep step;
    parse_pattern(require_field(component, "pattern", where), where.child("pattern"), step.literal,
                  step.regex);
    step.content = require_string(component, "content", where);
    growth_.multiply(step.content.size());
    steps_.push_back(std::move(step));
    return;
  }
  fail_unsupported(where, "normalizer", type, "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
}

void Normalizer::normalize(std::string& text, std::string& scratch,
                           RegexScratch& regex_scratch) const {
  for (const Step& step : steps_) {
    if (const auto* unicode = std::get_if<UnicodeStep>(&step)) {
      const auto* icu_normalizer = static_cast<const icu::Normalizer2*>(unicode->icu_normalizer);
      UErrorCode status = U_ZERO_ERROR;
      const icu::StringPiece input(text.data(), static_cast<int32_t>(text.size()));
      if (icu_normalizer->isNormalizedUTF8(input, status) && U_SUCCESS(status)) continue;
      status = U_ZERO_ERROR;
      scratch.clear();
      icu::StringByteSink<std::string> sink(&scratch, static_cast<int32_t>(text.size()));
      icu_normalizer->normalizeUTF8(0, input, sink, nullptr, status);
      SUROGATE_CHECK(U_SUCCESS(status), "ICU normalization failed: {}", u_errorName(status));
      text.swap(scratch);
    } else if (const auto* prepend = std::get_if<PrependStep>(&step)) {
      if (!text.empty()) text.insert(0, prepend->prefix);
    } else if (const auto* replace = std::get_if<ReplaceStep>(&step)) {
      replace_all(text, replace->literal, replace->regex.get(), replace->content, scratch,
                  regex_scratch);
    }
  }
}

}  // namespace surogate::tokenizer
