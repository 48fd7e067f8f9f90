// A prompt and its completions tokenized as TRL's preference trainers (DPOTrainer, KTOTrainer 1.16)
// do it; shared by the `type: preference` (preference_formatter.h) and `type: kto`
// (kto_formatter.h) formatters:
//   - text rows: encode(prompt) and encode(prompt + completion + EOS text unless the completion
//     already ends with it), both with the tokenizer's special tokens;
//   - conversational rows (message lists): the chat template renders the prompt with the generation
//     prompt, and prompt + completion messages without it; both tokenized without special tokens;
//   - the completion starts where the tokenized prompt and prompt + completion diverge (TRL's
//     common_prefix_length);
//   - a sequence, prompt + completion, is cut to max_length (keep_start); loss on the completion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/formatter.h"
#include "data/sample.h"

namespace surogate::data {

// What a row is called in messages: "preference" and "a prompt, a chosen and a rejected completion".
struct RowKind {
  const char* name;
  const char* needs;
  const char* completions;  // the completion fields, for the conversational message: "chosen and rejected"
};

// row[name]: present, a string or a message list, not empty; a UserError naming file and line
// otherwise (`option` is the field option that names it, e.g. "chosen_field").
const RowValue& prompt_completion_field(const Row& row, const std::string& name, const char* option,
                                        const RowKind& kind);

// The tokenized prompt and, per completion, prompt + completion (TRL's prompt_ids and
// prompt_completion_ids before the common prefix is taken).
struct PromptCompletionTokens {
  std::vector<int32_t> prompt;
  std::vector<std::vector<int32_t>> full;
};
PromptCompletionTokens tokenize_prompt_completions(const TextCodec& codec, const ChatRenderer& renderer,
                                                   const Row& row, const RowValue& prompt,
                                                   const std::vector<const RowValue*>& completions, const RowKind& kind);

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Appends full[0, min(size, max_length)) to the sample, labels on the tokens from prompt_length on.
void append_prompt_completion(TokenizedSample& sample, const std::vector<int32_t>& full, size_t prompt_length,
                              size_t max_length);

// The UserError of a prompt that alone fills max_length (TRL drops such rows silently).
[[noreturn]] void fail_prompt_fills_max_length(const Row& row, size_t prompt_length, size_t max_length);

}  // namespace surogate::data
