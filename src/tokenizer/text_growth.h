// How much longer the steps of tokenizer.json that rewrite text (normalizer, pre-tokenizer,
// decoder) can make a text, worked out at load so that a file whose steps compound (a Sequence of
// Replace steps each doubling their match, Metaspace steps prepending to ever more pieces) is
// rejected with its key instead of exhausting memory on the first text. Each step contributes a
// factor bounding output bytes per input byte; the factors multiply over a Sequence.
#pragma once

#include <cstdint>
#include <string>

namespace surogate::tokenizer {

class JsonPath;

// The most a normalizer + pre-tokenizer (together), or a decoder, may lengthen a text. Real
// tokenizers stay far below: Llama 2's Prepend + Replace is 12, Qwen's NFC + ByteLevel 6.
inline constexpr uint64_t kMaxTextGrowth = 1024;

// A saturating product of step factors (it stops just above kMaxTextGrowth).
class TextGrowth {
 public:
  void multiply(uint64_t factor);
  uint64_t factor() const { return factor_; }
  // What the factor is, for error messages: "12" or "more than 1024".
  std::string describe() const;

 private:
  uint64_t factor_ = 1;
};

// Throws UserError at `where` when `growth` passes kMaxTextGrowth; `how` says what each step
// contributes, e.g. "each Replace multiplies by the length of its content".
void check_text_growth(const TextGrowth& growth, const JsonPath& where, const std::string& how);

}  // namespace surogate::tokenizer
