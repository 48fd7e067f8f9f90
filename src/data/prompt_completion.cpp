// Prompt and completion tokens as TRL builds them; see prompt_completion.h.
#include "data/prompt_completion.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::data {

const RowValue& prompt_completion_field(const Row& row, const std::string& name, const char* option,
                                        const RowKind& kind) {
  if (!row.value.contains(name) || row.value[name].is_null()) {
    fail_user("{}: the {} row has no '{}' ({}); every row needs {}", row.origin.describe(), kind.name, name, option,
              kind.needs);
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

PromptCompletionTokens tokenize_prompt_completions(const TextCodec& codec, const ChatRenderer& renderer,
                                                   const Row& row, const RowValue& prompt,
                                                   const std::vector<const RowValue*>& completions, const RowKind& kind) {
  bool conversational = prompt.is_array();
  for (const RowValue* completion : completions) conversational = conversational || completion->is_array();
  PromptCompletionTokens tokens;
  if (!conversational) {
    const std::string eos = codec.eos_id ? codec.decode(std::vector<int32_t>{*codec.eos_id}) : std::string();
    const std::string& prompt_text = prompt.get<std::string>();
    tokens.prompt = codec.encode(prompt_text, true);
    for (const RowValue* completion : completions) {
      std::string text = completion->get<std::string>();
      if (codec.eos_id && !text.ends_with(eos)) text += eos;
      tokens.full.push_back(codec.encode(prompt_text + text, true));
    }
    return tokens;
  }
  if (!renderer) {
    fail_user("{}: conversational {} rows need a chat template: the tokenizer has none and no `template` is set",
              row.origin.describe(), kind.name);
  }
  bool all_lists = prompt.is_array();
  for (const RowValue* completion : completions) all_lists = all_lists && completion->is_array();
  if (!all_lists) {
    fail_user("{}: a conversational {} row has message lists in prompt, {} alike", row.origin.describe(), kind.name,
              kind.completions);
  }
  const RowValue no_tools;
  tokens.prompt = codec.encode(renderer(prompt, no_tools, true), false);
  for (const RowValue* completion : completions) {
    RowValue messages = prompt;
    for (const auto& message : *completion) messages.push_back(message);
    tokens.full.push_back(codec.encode(renderer(messages, no_tools, false), false));
  }
  return tokens;
}

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

void append_prompt_completion(TokenizedSample& sample, const std::vector<int32_t>& full, size_t prompt_length,
                              size_t max_length) {
  const size_t length = std::min(full.size(), max_length);
  for (size_t i = 0; i < length; ++i) {
    sample.input_ids.push_back(full[i]);
    sample.labels.push_back(i < prompt_length ? kIgnoreLabel : full[i]);
  }
}

void fail_prompt_fills_max_length(const Row& row, size_t prompt_length, size_t max_length) {
  fail_user("{}: the prompt alone is {} tokens, which fills max_length ({}): no completion token would be trained; "
            "shorten the prompt or raise max_length", row.origin.describe(), prompt_length, max_length);
}

}  // namespace surogate::data
