// Completions laid out for GRPO's loss as TRL lays them out: ids [B, T] (T: the longest
// completion), right-padded with pad_id, and the loss mask: 1 up to and including each
// completion's first EOS, 0 after. mask_truncated_completions (TRL's option): a completion whose
// last token is neither an EOS nor the pad id (it ran into max_completion_length) gets mask 0
// everywhere, so it adds nothing to the loss.
#pragma once

#include <cstdint>
#include <vector>

namespace surogate::rl {

struct CompletionBatch {
  int64_t sequences = 0, tokens = 0;  // B, T
  std::vector<int32_t> ids;           // [B, T]
  std::vector<float> mask;            // [B, T], 0 or 1
  std::vector<bool> truncated;        // [B]
  int64_t masked_tokens() const;      // Σ mask (dapo's normaliser, TRL's num_items_in_batch)
};

CompletionBatch completion_batch(const std::vector<std::vector<int32_t>>& completions,
                                 const std::vector<int32_t>& eos_ids, int32_t pad_id, bool mask_truncated_completions);

}  // namespace surogate::rl
