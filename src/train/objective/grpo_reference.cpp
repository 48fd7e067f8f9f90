// GRPO's reference log-probabilities; see grpo_reference.h.
#include "train/objective/grpo_reference.h"

#include <algorithm>
#include <map>

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
  // One feed call; each feed's logits score its owner's completion token k.
  struct Round {
    std::vector<generate::SlotFeed> feeds;
    std::vector<int32_t> labels;
    std::vector<int64_t> owners;
  };
  const auto score = [&](const Round& round, int64_t k) {
    if (round.feeds.empty()) return;
    const std::span<const float> logits = model.feed_in_place(round.feeds);
    const ops::TokenLogprobShape shape{static_cast<int64_t>(round.feeds.size()), model.vocab_size(), temperature};
    row_logp.assign(round.feeds.size(), 0.0f);
    row_logsumexp.assign(round.feeds.size(), 0.0f);
    ops::token_logprobs_forward<float>(shape, logits.data(), round.labels.data(), row_logp.data(), row_logsumexp.data());
    for (size_t i = 0; i < round.owners.size(); ++i) logps[static_cast<size_t>(round.owners[i] * width + k)] = row_logp[i];
  };
  for (int64_t first = 0; first < count; first += model.slots()) {
    const int64_t last = std::min(count, first + model.slots());
    for (int64_t slot = 0; slot < model.slots(); ++slot) model.clear(slot);
    // Round 0 feeds each prompt and scores the completion's first token. A prompt that several
    // completions share (a GRPO group) is computed once: the others copy all of it but its last
    // token (generate/engine.h's rule) and feed that token in a second call.
    Round prompts_round, last_tokens;
    std::vector<generate::PrefixCopy> copies;
    std::map<std::vector<int32_t>, int64_t> fed_prompts;  // prompt → the slot that computes it
    for (int64_t b = first; b < last; ++b) {
      const std::vector<int32_t>& completion = completions[static_cast<size_t>(b)];
      SUROGATE_CHECK(static_cast<int64_t>(completion.size()) <= width, "a completion of at most {} tokens", width);
      if (completion.empty()) continue;
      const std::vector<int32_t>& prompt = prompts[static_cast<size_t>(b)];
      const auto source = model.copies_prefixes() && prompt.size() > 1 ? fed_prompts.find(prompt) : fed_prompts.end();
      if (source == fed_prompts.end()) {
        fed_prompts.emplace(prompt, b - first);
        prompts_round.feeds.push_back({b - first, prompt});
        prompts_round.labels.push_back(completion.front());
        prompts_round.owners.push_back(b);
      } else {
        copies.push_back({source->second, b - first, static_cast<int64_t>(prompt.size()) - 1});
        last_tokens.feeds.push_back({b - first, {prompt.back()}});
        last_tokens.labels.push_back(completion.front());
        last_tokens.owners.push_back(b);
      }
    }
    score(prompts_round, 0);
    if (!copies.empty()) model.copy_prefixes(copies);
    score(last_tokens, 0);
    // Round k ≥ 1 feeds each completion still longer than k its token k − 1 and scores its token k.
    for (int64_t k = 1;; ++k) {
      Round round;
      for (int64_t b = first; b < last; ++b) {
        const std::vector<int32_t>& completion = completions[static_cast<size_t>(b)];
        if (static_cast<int64_t>(completion.size()) <= k) continue;
        round.feeds.push_back({b - first, {completion[static_cast<size_t>(k - 1)]}});
        round.labels.push_back(completion[static_cast<size_t>(k)]);
        round.owners.push_back(b);
      }
      if (round.feeds.empty()) break;
      score(round, k);
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
