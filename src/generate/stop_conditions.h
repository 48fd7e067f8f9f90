// When a generated sequence ends, and what it then holds. Push each chosen token; the sequence
// ends with finish_reason
//   "stop"   — an EOS id (any of the set): the id is kept in ids() (transformers' generate()
//              returns it) but is not part of the text;
//            — or a stop string (OpenAI's `stop`, which may span tokens) appeared in the text:
//              the text is cut before it, ids() end with the token that completed it;
//   "length" — max_new_tokens tokens were generated (an EOS or a stop string on that last token
//              still says "stop").
// The text is decode(ids, skip_special_tokens = true) without the EOS id, streamed through a
// TextStream: each push returns the text that became final (never part of a stop string), and
// the pieces add up to text().
//
//   StopConditions stop(rules, &tokenizer);
//   while (!stop.finished()) print(stop.push(sampler.choose(logits, context)));
//   write(stop.ids(), stop.text(), finish_reason_name(*stop.finish_reason()));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generate/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace surogate::generate {

enum class FinishReason { stop, length };

// "stop" or "length", as OpenAI's finish_reason and the output rows spell it.
std::string_view finish_reason_name(FinishReason reason);

struct StopRules {
  std::vector<int32_t> eos_token_ids;
  std::vector<std::string> stop_strings;  // need a tokenizer
  int64_t max_new_tokens = 1;             // >= 1
};

class StopConditions {
 public:
  // `tokenizer` (may be null: no text, and then no stop strings) must outlive this. UserError for
  // max_new_tokens < 1, an empty stop string, or stop strings without a tokenizer.
  StopConditions(StopRules rules, const tokenizer::Tokenizer* tokenizer);

  // Adds the token just generated (not after finished()); returns the text that became final.
  std::string push(int32_t token);

  bool finished() const { return finish_reason_.has_value(); }
  std::optional<FinishReason> finish_reason() const { return finish_reason_; }
  // The completion's token ids (an EOS id included; nothing after a stop string's last token).
  const std::vector<int32_t>& ids() const { return ids_; }
  // The completion's text so far (all of it once finished); empty without a tokenizer.
  const std::string& text() const;

 private:
  StopRules rules_;
  std::optional<TextStream> stream_;
  std::vector<int32_t> ids_;
  std::optional<FinishReason> finish_reason_;
};

}  // namespace surogate::generate
