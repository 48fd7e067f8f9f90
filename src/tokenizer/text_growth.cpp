// See text_growth.h.
#include "tokenizer/text_growth.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/json_fields.h"

namespace surogate::tokenizer {

void TextGrowth::multiply(uint64_t factor) {
  factor_ = std::min(factor_ * std::clamp<uint64_t>(factor, 1, kMaxTextGrowth + 1), kMaxTextGrowth + 1);
}

std::string TextGrowth::describe() const {
  return factor_ > kMaxTextGrowth ? fmt::format("more than {}", kMaxTextGrowth) : std::to_string(factor_);
}

void check_text_growth(const TextGrowth& growth, const JsonPath& where, const std::string& how) {
  if (growth.factor() <= kMaxTextGrowth) return;
  fail_at(where, fmt::format("these steps can make a text {} times longer ({}); Surogate accepts at most {} times, "
                             "so that one text cannot exhaust memory: shorten the replacement texts or remove "
                             "repeated steps",
                             growth.describe(), how, kMaxTextGrowth));
}

}  // namespace surogate::tokenizer
