// KTO rows → the row's prompt and completion tokens as TRL builds them; see kto_formatter.h.
#include "data/kto_formatter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/prompt_completion.h"

namespace surogate::data {
namespace {

const RowKind kKtoRow{"kto", "a prompt, a completion and a label", "completion"};

bool kto_row_label(const DatasetConfig& dataset, const Row& row) {
  const std::string& name = dataset.label_field;
  if (!row.value.contains(name) || row.value[name].is_null()) {
    fail_user("{}: the kto row has no '{}' (label_field); every row needs a prompt, a completion and a label",
              row.origin.describe(), name);
  }
  if (!row.value[name].is_boolean()) {
    fail_user("{}: '{}' (label_field) must be true (a desirable completion) or false (an undesirable one), not {}",
              row.origin.describe(), name, row.value[name].dump());
  }
  return row.value[name].get<bool>();
}

}  // namespace

FormattedRow format_kto_row(const DatasetConfig& dataset, const TextCodec& codec, const ChatRenderer& renderer,
                            const Row& row, size_t max_length) {
  const RowValue& prompt = prompt_completion_field(row, dataset.prompt_field, "prompt_field", kKtoRow);
  const RowValue& completion = prompt_completion_field(row, dataset.completion_field, "completion_field", kKtoRow);
  const bool desirable = kto_row_label(dataset, row);
  const PromptCompletionTokens tokens = tokenize_prompt_completions(codec, renderer, row, prompt, {&completion}, kKtoRow);
  const std::vector<int32_t>& full = tokens.full[0];
  const size_t prompt_length = common_prefix_length(tokens.prompt, full);
  if (prompt_length >= max_length) fail_prompt_fills_max_length(row, prompt_length, max_length);
  if (full.size() <= prompt_length) {
    fail_user("{}: the completion adds no token after the prompt", row.origin.describe());
  }
  // The completion is kept up to max_length tokens: as another row's KL completion it may follow a
  // shorter prompt, where more of it fits (kto_rows.cpp cuts each sequence to max_length).
  FormattedRow result;
  TokenizedSample sample;
  sample.origin = row.origin;
  sample.kto_label = desirable ? 1 : 0;
  append_prompt_completion(sample, full, prompt_length, prompt_length + max_length);
  result.text = codec.decode(full);
  result.sample = std::move(sample);
  return result;
}

}  // namespace surogate::data
