// Preference rows → the pair's tokens as TRL builds them; see preference_formatter.h.
#include "data/preference_formatter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/prompt_completion.h"

namespace surogate::data {
namespace {

const RowKind kPreferenceRow{"preference", "a prompt, a chosen and a rejected completion", "chosen and rejected"};

}  // namespace

FormattedRow format_preference_row(const DatasetConfig& dataset, const TextCodec& codec, const ChatRenderer& renderer,
                                   const Row& row, size_t max_length) {
  const RowValue& prompt = prompt_completion_field(row, dataset.prompt_field, "prompt_field", kPreferenceRow);
  const RowValue& chosen = prompt_completion_field(row, dataset.chosen_field, "chosen_field", kPreferenceRow);
  const RowValue& rejected = prompt_completion_field(row, dataset.rejected_field, "rejected_field", kPreferenceRow);
  const PromptCompletionTokens tokens =
      tokenize_prompt_completions(codec, renderer, row, prompt, {&chosen, &rejected}, kPreferenceRow);
  const std::vector<int32_t>& prompt_chosen = tokens.full[0];
  const std::vector<int32_t>& prompt_rejected = tokens.full[1];
  const size_t prompt_length = std::min(common_prefix_length(tokens.prompt, prompt_chosen),
                                        common_prefix_length(tokens.prompt, prompt_rejected));
  if (prompt_length >= max_length) fail_prompt_fills_max_length(row, prompt_length, max_length);
  for (const auto* full : {&prompt_chosen, &prompt_rejected}) {
    if (full->size() <= prompt_length) {
      fail_user("{}: the {} completion adds no token after the prompt", row.origin.describe(),
                full == &prompt_chosen ? "chosen" : "rejected");
    }
  }
  FormattedRow result;
  TokenizedSample sample;
  sample.origin = row.origin;
  append_prompt_completion(sample, prompt_chosen, prompt_length, max_length);
  sample.first_part = static_cast<int32_t>(sample.input_ids.size());
  append_prompt_completion(sample, prompt_rejected, prompt_length, max_length);
  result.text = codec.decode(prompt_chosen) + "\n" + codec.decode(prompt_rejected);
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
