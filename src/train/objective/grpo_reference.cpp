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

std::vector<double> rank_reference_logps(GrpoRankModels& models, const GrpoGeneration& generation, int64_t batch,
                                         int64_t width, double temperature) {
  const size_t rows = generation.completions.size();
  std::vector<double> logps(rows * static_cast<size_t>(width), 0.0);
  const auto ranks = static_cast<size_t>(models.ranks());
  models.on_each([&](int rank, generate::NextTokenModel& model) {
    std::vector<size_t> own;
    for (size_t row = 0; row < rows; ++row) {
      if ((row / static_cast<size_t>(batch)) % ranks == static_cast<size_t>(rank)) own.push_back(row);
    }
    std::vector<std::vector<int32_t>> prompts, completions;
    for (const size_t row : own) {
      prompts.push_back(generation.prompts.at(row));
      completions.push_back(generation.completions.at(row));
    }
    const std::vector<double> scored = reference_token_logps(model, prompts, completions, width, temperature);
    for (size_t i = 0; i < own.size(); ++i) {  // each rank writes only its own rows
      std::copy_n(scored.begin() + static_cast<std::ptrdiff_t>(i) * width, width,
                  logps.begin() + static_cast<std::ptrdiff_t>(own[i]) * width);
    }
  });
  return logps;
}

}  // namespace surogate::train
