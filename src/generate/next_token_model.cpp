// NextTokenModel's default greedy feed (next_token_model.h): the host's choice over the logits.
#include "generate/next_token_model.h"

#include "generate/sampling.h"

namespace surogate::generate {

std::vector<int32_t> NextTokenModel::feed_greedy(std::span<const SlotFeed> feeds) {
  const std::span<const float> logits = feed_in_place(feeds);
  const size_t vocab = static_cast<size_t>(vocab_size());
  std::vector<int32_t> tokens(feeds.size());
  for (size_t row = 0; row < feeds.size(); ++row) tokens[row] = greedy_choice(logits.subspan(row * vocab, vocab));
  return tokens;
}

}  // namespace surogate::generate
