// One micro-batch of preference pairs as the preference graph's inputs (preference_graph.h). A row
// of the batch is one pair (data/preference_formatter.h): its first document the chosen sequence,
// its second the rejected one (KTO: the row's sequence, then its KL sequence); a padding row (the last batch of an epoch) is no pair.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/packing.h"

namespace surogate::train {

// The reference log-probabilities of one split's rows (row i: chosen at 2i, rejected at 2i + 1).
using ReferenceLogps = std::vector<float>;

struct PairInputs {
  int64_t batch = 0;
  std::vector<int32_t> sequence_ids;  // [B·T]: row r's chosen r, rejected B + r, −1 elsewhere
  std::vector<float> reference;       // [2B]
  std::vector<float> lengths;         // [2B] completion tokens (targets) per sequence
  std::vector<float> labels;          // [B] KTO: 1 desirable, 0 undesirable (0 for the other losses)
  int64_t pairs = 0;                  // rows holding a pair
  double chosen_tokens = 0.0;
  // The batch's prompt-sharing tables (data/prompt_sharing.h), or null: the batch must outlive it.
  const data::SharedPromptLayout* shared_prompts = nullptr;
};

// `reference`: the split's table (null: zeros, the reference pass itself or reference-free losses).
// Targets are the labels shifted as train/batch_inputs.h does. `kto_labels`: KTO's split labels
// ('1' / '0' per packed row, data/kto_rows.h), or null.
PairInputs pair_inputs(const data::PackedBatch& batch, const ReferenceLogps* reference,
                       const std::string* kto_labels = nullptr);

}  // namespace surogate::train
