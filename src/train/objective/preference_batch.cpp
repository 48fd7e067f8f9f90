// Preference pairs → graph inputs; see preference_batch.h.
#include "train/objective/preference_batch.h"

#include "core/error.h"
#include "data/sample.h"

namespace surogate::train {

PairInputs pair_inputs(const data::PackedBatch& batch, const ReferenceLogps* reference, const std::string* kto_labels) {
  const int64_t B = batch.batch_size, T = batch.sequence_length;
  PairInputs inputs;
  inputs.batch = B;
  inputs.sequence_ids.assign(static_cast<size_t>(B * T), -1);
  inputs.reference.assign(static_cast<size_t>(2 * B), 0.0f);
  inputs.lengths.assign(static_cast<size_t>(2 * B), 0.0f);
  inputs.labels.assign(static_cast<size_t>(B), 0.0f);
  if (batch.shared_prompts.expanded_length > 0) inputs.shared_prompts = &batch.shared_prompts;
  for (int64_t row = 0; row < B; ++row) {
    const size_t start = static_cast<size_t>(row * T);
    int32_t chosen_document = -1, rejected_document = -1;
    for (int64_t i = 0; i + 1 < T; ++i) {
      const size_t at = start + static_cast<size_t>(i);
      const int32_t document = batch.document_ids[at];
      if (document < 0) continue;
      if (chosen_document < 0) chosen_document = document;
      if (document != chosen_document && rejected_document < 0) rejected_document = document;
      // The target of position i is labels[i + 1] inside the row (batch_inputs.h).
      if (batch.labels[at + 1] == data::kIgnoreLabel || batch.document_ids[at + 1] != document) continue;
      const int64_t sequence = document == chosen_document ? row : document == rejected_document ? B + row : -1;
      SUROGATE_CHECK(sequence >= 0, "a preference row holds two documents");
      inputs.sequence_ids[at] = static_cast<int32_t>(sequence);
      inputs.lengths[static_cast<size_t>(sequence)] += 1.0f;
    }
    if (inputs.lengths[static_cast<size_t>(row)] <= 0.0f) continue;  // padding: no pair
    ++inputs.pairs;
    inputs.chosen_tokens += inputs.lengths[static_cast<size_t>(row)];
    if (kto_labels != nullptr && row < static_cast<int64_t>(batch.rows.size())) {
      const size_t packed = static_cast<size_t>(batch.rows[static_cast<size_t>(row)]);
      SUROGATE_CHECK(packed < kto_labels->size(), "a kto label for row {}", packed);
      inputs.labels[static_cast<size_t>(row)] = (*kto_labels)[packed] == '1' ? 1.0f : 0.0f;
    }
    if (reference != nullptr && row < static_cast<int64_t>(batch.rows.size())) {
      const size_t pair = static_cast<size_t>(batch.rows[static_cast<size_t>(row)]);
      SUROGATE_CHECK(2 * pair + 1 < reference->size(), "a reference for row {}", pair);
      inputs.reference[static_cast<size_t>(row)] = (*reference)[2 * pair];
      inputs.reference[static_cast<size_t>(B + row)] = (*reference)[2 * pair + 1];
    }
  }
  return inputs;
}

}  // namespace surogate::train
