// The regular expressions of tokenizer.json (Split pre-tokenizers, Replace normalizers and
// decoders), compiled with PCRE2 in UTF + Unicode-property mode with JIT. HF `tokenizers` runs
// these patterns with Oniguruma; the one place the two engines disagree for these files is `\s`,
// which Oniguruma reads as the Unicode White_Space property, so `\s` / `\S` are rewritten to
// `\p{White_Space}` / `\P{White_Space}` before compiling. `\C` (one byte, which could end a match
// inside a character and split the text into invalid UTF-8) is refused, as Oniguruma has no `\C`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace surogate::tokenizer {

class JsonPath;

struct ByteSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// Per-thread match state (PCRE2 match data); one per worker, reused across calls.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;
  void* match_data() const { return match_data_; }

 private:
  void* match_data_ = nullptr;
};

class Regex {
 public:
  // Throws UserError naming `where` when the pattern does not compile (or uses `\C`).
  static Regex compile(std::string_view pattern, const JsonPath& where);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Appends the non-empty, non-overlapping matches of `text` (valid UTF-8), left to right, as
  // byte offsets relative to `text` plus `base`. A match that fails (PCRE2's backtracking or
  // depth limit, e.g. a nested quantifier on a long run) is a UserError naming the pattern's key.
  void find_all(std::string_view text, uint32_t base, RegexScratch& scratch,
                std::vector<ByteSpan>& matches) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
  std::string file_;  // where the pattern is written, for errors while matching
  std::string key_;
  bool jit_ = false;
};

// The Oniguruma-to-PCRE2 rewrite described above (exposed for tests).
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace surogate::tokenizer
