// Preference rows → the pair's tokens as TRL builds them; see preference_formatter.h.
#include "data/preference_formatter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"

namespace surogate::data {
namespace {

const RowValue& preference_field(const Row& row, const std::string& name, const char* option) {
  if (!row.value.contains(name) || row.value[name].is_null()) {
    fail_user("{}: the preference row has no '{}' ({}); every row needs a prompt, a chosen and a rejected completion",
              row.origin.describe(), name, option);
  }
  const RowValue& value = row.value[name];
  if (!value.is_string() && !value.is_array()) {
    fail_user("{}: '{}' ({}) must be a string or a list of chat messages", row.origin.describe(), name, option);
  }
  if ((value.is_string() && value.get<std::string>().empty()) || (value.is_array() && value.empty())) {
    fail_user("{}: '{}' ({}) is empty", row.origin.describe(), name, option);
  }
  return value;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

struct PairTokens {
  std::vector<int32_t> prompt, prompt_chosen, prompt_rejected;
};

PairTokens tokenize_text_pair(const TextCodec& codec, const std::string& prompt, std::string chosen, std::string rejected) {
  if (codec.eos_id) {
    const std::string eos = codec.decode(std::vector<int32_t>{*codec.eos_id});
    for (std::string* completion : {&chosen, &rejected}) {
      if (!completion->ends_with(eos)) *completion += eos;
    }
  }
  return {codec.encode(prompt, true), codec.encode(prompt + chosen, true), codec.encode(prompt + rejected, true)};
}

PairTokens tokenize_chat_pair(const TextCodec& codec, const ChatRenderer& renderer, const Row& row,
                              const RowValue& prompt, const RowValue& chosen, const RowValue& rejected) {
  if (!renderer) {
    fail_user("{}: conversational preference rows need a chat template: the tokenizer has none and no `template` is "
              "set", row.origin.describe());
  }
  if (!prompt.is_array() || !chosen.is_array() || !rejected.is_array()) {
    fail_user("{}: a conversational preference row has message lists in prompt, chosen and rejected alike",
              row.origin.describe());
  }
  const RowValue no_tools;
  auto joined = [&](const RowValue& completion) {
    RowValue messages = prompt;
    for (const auto& message : completion) messages.push_back(message);
    return codec.encode(renderer(messages, no_tools, false), false);
  };
  return {codec.encode(renderer(prompt, no_tools, true), false), joined(chosen), joined(rejected)};
}

// prompt ids + completion ids cut to max_length, labels on the completion.
void append_sequence(TokenizedSample& sample, const std::vector<int32_t>& full, size_t prompt_length, size_t max_length) {
  const size_t length = std::min(full.size(), max_length);
  for (size_t i = 0; i < length; ++i) {
    sample.input_ids.push_back(full[i]);
    sample.labels.push_back(i < prompt_length ? kIgnoreLabel : full[i]);
  }
}

}  // namespace

FormattedRow format_preference_row(const DatasetConfig& dataset, const TextCodec& codec, const ChatRenderer& renderer,
                                   const Row& row, size_t max_length) {
  const RowValue& prompt = preference_field(row, dataset.prompt_field, "prompt_field");
  const RowValue& chosen = preference_field(row, dataset.chosen_field, "chosen_field");
  const RowValue& rejected = preference_field(row, dataset.rejected_field, "rejected_field");
  const bool conversational = chosen.is_array() || rejected.is_array() || prompt.is_array();
  const PairTokens tokens =
      conversational ? tokenize_chat_pair(codec, renderer, row, prompt, chosen, rejected)
                     : tokenize_text_pair(codec, prompt.get<std::string>(), chosen.get<std::string>(), rejected.get<std::string>());
  const size_t prompt_length =
      std::min(common_prefix(tokens.prompt, tokens.prompt_chosen), common_prefix(tokens.prompt, tokens.prompt_rejected));
  if (prompt_length >= max_length) {
    fail_user("{}: the prompt alone is {} tokens, which fills max_length ({}): no completion token would be trained; "
              "shorten the prompt or raise max_length", row.origin.describe(), prompt_length, max_length);
  }
  for (const auto* full : {&tokens.prompt_chosen, &tokens.prompt_rejected}) {
    if (full->size() <= prompt_length) {
      fail_user("{}: the {} completion adds no token after the prompt", row.origin.describe(),
                full == &tokens.prompt_chosen ? "chosen" : "rejected");
    }
  }
  FormattedRow result;
  TokenizedSample sample;
  sample.origin = row.origin;
  append_sequence(sample, tokens.prompt_chosen, prompt_length, max_length);
  sample.first_part = static_cast<int32_t>(sample.input_ids.size());
  append_sequence(sample, tokens.prompt_rejected, prompt_length, max_length);
  result.text = codec.decode(tokens.prompt_chosen) + "\n" + codec.decode(tokens.prompt_rejected);
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
