// `type: kto` rows ({prompt, completion, label}, the names mapped by prompt_field /
// completion_field / label_field) tokenized as TRL's KTOTrainer (1.16) does, with the prompt /
// completion rules of data/prompt_completion.h. A formatted row is one document: the prompt's
// tokens (up to where prompt and prompt + completion diverge), then the completion's (labelled),
// at most max_length of them, and `kto_label` (sample.h). Its mismatched "KL" sequence needs the
// neighbouring rows, so the split's rows are paired afterwards (data/kto_rows.h), which also cuts
// each sequence to max_length. Bad rows are UserErrors naming file and line: a missing or non-bool
// label, a missing or empty prompt / completion, a completion adding no token, a prompt that alone
// fills max_length (TRL drops those silently; here the data is to be fixed).
#pragma once

#include <cstddef>

#include "config/config.h"
#include "data/formatter.h"
#include "data/sample.h"

namespace surogate::data {

FormattedRow format_kto_row(const DatasetConfig& dataset, const TextCodec& codec, const ChatRenderer& renderer,
                            const Row& row, size_t max_length);

}  // namespace surogate::data
