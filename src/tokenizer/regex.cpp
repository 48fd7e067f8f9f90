// PCRE2 wrapper: compile once at load, match with JIT and without re-validating UTF-8 (inputs are
// sanitized on the way in, so every text reaching here is valid UTF-8).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace surogate::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

RegexScratch::RegexScratch() {
  match_data_ = pcre2_match_data_create(32, nullptr);
  if (!match_data_) throw std::bad_alloc();
}

RegexScratch::~RegexScratch() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
}

std::string translate_oniguruma_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += c;
        out += next;
      }
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Regex Regex::compile(std::string_view pattern, const JsonPath& where) {
  Regex regex;
  regex.pattern_ = std::string(pattern);
  regex.file_ = where.file();
  regex.key_ = where.key();
  const std::string translated = translate_oniguruma_pattern(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                   translated.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | PCRE2_NEVER_BACKSLASH_C,
                                   &error_code, &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    fail_at(where,
            fmt::format(
                "the regular expression {:?} does not compile (at offset {}: {}); fix the pattern",
                std::string(pattern), error_offset, reinterpret_cast<const char*>(message)));
  }
  regex.code_ = std::make_unique<Code>();
  regex.code_->code = code;
  regex.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return regex;
}

void Regex::find_all(std::string_view text, uint32_t base, RegexScratch& scratch,
                     std::vector<ByteSpan>& matches) const {
  auto* match_data = static_cast<pcre2_match_data*>(scratch.match_data());
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE length = text.size();
  PCRE2_SIZE start = 0;
  while (start <= length) {
    const int result =
        jit_ ? pcre2_jit_match(code_->code, subject, length, start, 0, match_data, nullptr)
             : pcre2_match(code_->code, subject, length, start, PCRE2_NO_UTF_CHECK, match_data,
                           nullptr);
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(result, message, sizeof(message));
      fail_at(JsonPath(file_, key_),
              fmt::format("matching the regular expression {:?} failed ({}) on a text of {} bytes; simplify the "
                          "pattern (e.g. nested repetitions such as (a*)*)",
                          pattern_, reinterpret_cast<const char*>(message), length));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const PCRE2_SIZE match_begin = ovector[0];
    const PCRE2_SIZE match_end = ovector[1];
    if (match_end > match_begin) {
      matches.push_back(
          {static_cast<uint32_t>(base + match_begin), static_cast<uint32_t>(base + match_end)});
      start = match_end;
    } else {
      // Empty match: step over one whole UTF-8 character.
      start = match_end + 1;
      while (start < length && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
}

}  // namespace surogate::tokenizer
