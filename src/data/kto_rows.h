// A split's `type: kto` documents (data/kto_formatter.h) made into the rows `surogate dpo` trains
// with loss.type kto: each row's sequence, then its mismatched "KL" sequence, as TRL's KTOTrainer
// (1.16) builds them: within each chunk of `batch` rows (per_device_train_batch_size) in the split's
// order, row i's KL completion is the completion of row i − 1, the chunk's first row taking the
// last's: (x_1, y_n), (x_2, y_1), ..., (x_n, y_{n−1}). The split keeps this order through packing
// and batching (no shuffle, as TRL's sequential sampler), so each micro-batch is one chunk and its
// KL completions are the same set as its completions. Each sequence, prompt + completion, is cut to
// max_length (keep_start).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "data/sample.h"

namespace surogate::data {

// Each document becomes a pair sample (sample.h: first_part): its sequence, then its KL sequence.
void add_kl_completions(std::vector<TokenizedSample>& documents, size_t batch, size_t max_length);

// The documents' labels in order: '1' desirable, '0' undesirable (the token cache's report keeps
// them, data/pipeline.cpp; train/objective reads them per row).
std::string kto_label_string(const std::vector<TokenizedSample>& documents);

}  // namespace surogate::data
