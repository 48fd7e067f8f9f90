// The end of a sequence (stop_conditions.h): EOS ids, stop strings through the TextStream, length.
#include "generate/stop_conditions.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::generate {

std::string_view finish_reason_name(FinishReason reason) {
  return reason == FinishReason::stop ? "stop" : "length";
}

StopConditions::StopConditions(StopRules rules, const tokenizer::Tokenizer* tokenizer)
    : rules_(std::move(rules)) {
  if (rules_.max_new_tokens < 1)
    fail_user("max_new_tokens must be >= 1, got {}", rules_.max_new_tokens);
  if (tokenizer != nullptr) {
    stream_.emplace(*tokenizer, rules_.stop_strings);
  } else if (!rules_.stop_strings.empty()) {
    fail_user("stop strings need the model's tokenizer (tokenizer.json in the model folder)");
  }
}

std::string StopConditions::push(int32_t token) {
  SUROGATE_CHECK(!finished(), "a token pushed after the sequence finished ({})",
                 finish_reason_name(*finish_reason_));
  ids_.push_back(token);
  const bool eos = std::find(rules_.eos_token_ids.begin(), rules_.eos_token_ids.end(), token) !=
                   rules_.eos_token_ids.end();
  std::string shown;
  if (stream_ && !eos) shown = stream_->push(token);
  if (eos || (stream_ && stream_->stopped())) {
    finish_reason_ = FinishReason::stop;
  } else if (static_cast<int64_t>(ids_.size()) >= rules_.max_new_tokens) {
    finish_reason_ = FinishReason::length;
  }
  if (finished() && stream_) shown += stream_->flush();
  return shown;
}

const std::string& StopConditions::text() const {
  static const std::string kNoText;
  return stream_ ? stream_->text() : kNoText;
}

}  // namespace surogate::generate
