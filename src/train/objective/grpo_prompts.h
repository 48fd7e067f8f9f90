// `surogate grpo`'s data: every `type: prompt` row of `datasets` (data/prompt_rows.h: the prompt
// rendered and tokenized, the other columns kept for the reward functions), read in file order,
// and a token cache of them — one prompt per row, no loss token — that the run's DataLoader
// shuffles and walks as it walks any cache, so the prompts of each step, the epochs and the
// resumed position are those of every other training mode (train/run/start_records.cpp seeks it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "config/config.h"
#include "data/prompt_rows.h"
#include "data/token_cache.h"

namespace surogate::train {

struct PromptSet {
  std::vector<data::PromptRow> rows;
  std::vector<data::PromptRow> eval_rows;  // the validation prompts (grpo_evaluation.h), in order
  int32_t pad_id = 0;  // the tokenizer's (its EOS when it has none), as the data pipeline pads
};

// Each dataset's rows up to its `samples`; UserError (naming file and line) for a bad row, or
// when there is no training row at all. The validation prompts: `validation_datasets`' rows; else,
// when validation_split_ratio is set in the configuration (its default 0.1 is not read: a GRPO
// run evaluates only when asked, as TRL's), that share of each dataset's rows, held out as the
// data pipeline holds rows out (a permutation seeded with eval_seed).
PromptSet read_prompt_rows(const Config& config);

// The most tokens of any prompt of the set, training or validation (at least 1).
int64_t longest_prompt(const PromptSet& prompts);

// The prompts as a token cache at `path` (rewritten when its key differs): train row i holds
// prompt i's ids, left-aligned in rows of the longest prompt's length; the eval split the
// validation prompts alike.
std::shared_ptr<data::TokenCache> prompt_token_cache(const PromptSet& prompts, const std::filesystem::path& path);

}  // namespace surogate::train
