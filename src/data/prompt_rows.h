// `type: prompt` rows, the data of GRPO: each row holds a prompt — a string, or chat messages
// (OpenAI role / content) rendered through the chat template with its generation prompt, as TRL's
// maybe_apply_chat_template does — and any other columns, which go to the reward functions as
// they are (the expected `answer` of exact_match, ...). The prompt is tokenized without special
// tokens (the chat template wrote them; TRL passes add_special_tokens=False) and, beyond
// max_prompt_length tokens, keeps its last ones (TRL truncates from the left).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sample.h"

namespace surogate::data {

struct PromptRow {
  RowValue prompt;                 // as the row gave it: a string or a list of messages
  RowValue columns;                // every other column of the row (an object)
  std::string text;                // what the model is fed, rendered
  std::vector<int32_t> prompt_ids;
  RowOrigin origin;
};

// UserError naming the row's file and line when `prompt_field` is missing, is neither a non-empty
// string nor a non-empty list of {role, content} messages, or is messages while `renderer` is
// empty (no chat template). max_prompt_length 0: no limit.
PromptRow read_prompt_row(const Row& row, const TextCodec& codec, const ChatRenderer& renderer,
                          int64_t max_prompt_length = 0, const std::string& prompt_field = "prompt");

}  // namespace surogate::data
