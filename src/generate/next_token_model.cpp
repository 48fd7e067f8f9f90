// NextTokenModel's default greedy and sampled feeds (next_token_model.h): the host's choice over
// the logits.
#include "generate/next_token_model.h"

#include "core/error.h"
#include "generate/sampling.h"
#include "ops/parallel_for.h"
#include "ops/sample_tokens.h"

namespace surogate::generate {

std::vector<int32_t> NextTokenModel::feed_greedy(std::span<const SlotFeed> feeds) {
  const std::span<const float> logits = feed_in_place(feeds);
  const size_t vocab = static_cast<size_t>(vocab_size());
  std::vector<int32_t> tokens(feeds.size());
  for (size_t row = 0; row < feeds.size(); ++row) tokens[row] = greedy_choice(logits.subspan(row * vocab, vocab));
  return tokens;
}

std::vector<int32_t> NextTokenModel::feed_sampled(std::span<const SlotFeed> feeds, std::span<const RowChoice> choices) {
  SUROGATE_CHECK(choices.size() == feeds.size(), "feed_sampled: {} choices for {} feeds", choices.size(), feeds.size());
  const std::span<const float> logits = feed_in_place(feeds);
  const int64_t vocab = vocab_size();
  std::vector<int32_t> tokens(feeds.size());
  // A large vocabulary makes this the host's main cost of a step: the rows in parallel.
  ops::parallel_for(static_cast<int64_t>(feeds.size()), [&](int64_t row) {
    const RowChoice& choice = choices[static_cast<size_t>(row)];
    ops::sample_tokens(logits.data() + row * vocab, 1, vocab, &choice.sampling, choice.context.data(),
                       static_cast<int64_t>(choice.context.size()), &tokens[static_cast<size_t>(row)]);
  });
  return tokens;
}

void NextTokenModel::copy_prefixes(std::span<const PrefixCopy>) {
  SUROGATE_CHECK(false, "this model does not copy prefixes between slots (copies_prefixes() is false)");
}

}  // namespace surogate::generate
