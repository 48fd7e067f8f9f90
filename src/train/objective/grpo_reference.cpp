// GRPO's reference log-probabilities; see grpo_reference.h.
#include "train/objective/grpo_reference.h"

#include <algorithm>

#include "core/error.h"
#include "ops/grpo_logprobs.h"

namespace surogate::train {

std::vector<double> reference_token_logps(generate::NextTokenModel& model,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const std::vector<std::vector<int32_t>>& completions, int64_t width,
                                          double temperature) {
  const auto count = static_cast<int64_t>(completions.size());
  SUROGATE_CHECK(static_cast<int64_t>(prompts.size()) == count, "a prompt per completion");
  std::vector<double> logps(static_cast<size_t>(count * width), 0.0);
  std::vector<float> row_logp, row_logsumexp;
  for (int64_t first = 0; first < count; first += model.slots()) {
    const int64_t last = std::min(count, first + model.slots());
    for (int64_t slot = 0; slot < model.slots(); ++slot) model.clear(slot);
    // Round k feeds each completion still longer than k: its prompt (k = 0) or its token k − 1,
    // and scores its token k with the logits after that feed.
    for (int64_t k = 0;; ++k) {
      std::vector<generate::SlotFeed> feeds;
      std::vector<int32_t> labels;
      std::vector<int64_t> owners;
      for (int64_t b = first; b < last; ++b) {
        const std::vector<int32_t>& completion = completions[static_cast<size_t>(b)];
        SUROGATE_CHECK(static_cast<int64_t>(completion.size()) <= width, "a completion of at most {} tokens", width);
        if (static_cast<int64_t>(completion.size()) <= k) continue;
        feeds.push_back({b - first, k == 0 ? prompts[static_cast<size_t>(b)]
                                           : std::vector<int32_t>{completion[static_cast<size_t>(k - 1)]}});
        labels.push_back(completion[static_cast<size_t>(k)]);
        owners.push_back(b);
      }
      if (feeds.empty()) break;
      const std::span<const float> logits = model.feed_in_place(feeds);
      const ops::TokenLogprobShape shape{static_cast<int64_t>(feeds.size()), model.vocab_size(), temperature};
      row_logp.assign(feeds.size(), 0.0f);
      row_logsumexp.assign(feeds.size(), 0.0f);
      ops::token_logprobs_forward<float>(shape, logits.data(), labels.data(), row_logp.data(), row_logsumexp.data());
      for (size_t i = 0; i < owners.size(); ++i) logps[static_cast<size_t>(owners[i] * width + k)] = row_logp[i];
    }
  }
  for (int64_t slot = 0; slot < model.slots(); ++slot) model.clear(slot);
  return logps;
}

}  // namespace surogate::train
