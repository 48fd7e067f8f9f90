// `type: preference` rows ({prompt, chosen, rejected}, the names mapped by prompt_field /
// chosen_field / rejected_field) tokenized exactly as TRL's DPOTrainer (1.16) does:
//   - text rows: prompt = encode(prompt) and prompt+completion = encode(prompt + completion + EOS text
//     unless the completion already ends with it), both with the tokenizer's special tokens;
//   - conversational rows (message lists): the chat template renders the prompt with the generation
//     prompt, and prompt + completion messages without it; both tokenized without special tokens;
//   - the completion starts where the tokenized prompt and prompt+completion diverge (the shorter of
//     the chosen and rejected common prefixes); each sequence prompt + completion is cut to
//     max_length (keep_start); loss only on the completion tokens.
// The pair is one TokenizedSample: chosen sequence then rejected sequence, `first_part` = the chosen
// sequence's length (the packer writes them as two documents of one row). Bad rows are UserErrors
// naming file and line: a missing field, an empty completion, a prompt that alone fills max_length
// (TRL drops those rows silently; here they are refused so the data is fixed).
#pragma once

#include <cstddef>

#include "config/config.h"
#include "data/formatter.h"
#include "data/sample.h"

namespace surogate::data {

FormattedRow format_preference_row(const DatasetConfig& dataset, const TextCodec& codec, const ChatRenderer& renderer,
                                   const Row& row, size_t max_length);

}  // namespace surogate::data
