// Padding and masking completions (see completion_batch.h).
#include "rl/completion_batch.h"

#include <algorithm>

namespace surogate::rl {

int64_t CompletionBatch::masked_tokens() const {
  int64_t count = 0;
  for (float value : mask) count += value != 0.0f ? 1 : 0;
  return count;
}

CompletionBatch completion_batch(const std::vector<std::vector<int32_t>>& completions,
                                 const std::vector<int32_t>& eos_ids, int32_t pad_id, bool mask_truncated_completions) {
  CompletionBatch batch;
  batch.sequences = static_cast<int64_t>(completions.size());
  for (const std::vector<int32_t>& completion : completions) {
    batch.tokens = std::max(batch.tokens, static_cast<int64_t>(completion.size()));
  }
  batch.ids.assign(static_cast<size_t>(batch.sequences * batch.tokens), pad_id);
  batch.mask.assign(batch.ids.size(), 0.0f);
  auto is_eos = [&](int32_t id) { return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end(); };
  for (size_t b = 0; b < completions.size(); ++b) {
    const std::vector<int32_t>& completion = completions[b];
    const bool truncated = completion.empty() || (!is_eos(completion.back()) && completion.back() != pad_id);
    batch.truncated.push_back(truncated);
    const size_t row = b * static_cast<size_t>(batch.tokens);
    bool ended = false;
    for (size_t t = 0; t < completion.size(); ++t) {
      batch.ids[row + t] = completion[t];
      batch.mask[row + t] = ended || (truncated && mask_truncated_completions) ? 0.0f : 1.0f;
      ended = ended || is_eos(completion[t]);
    }
  }
  return batch;
}

}  // namespace surogate::rl
