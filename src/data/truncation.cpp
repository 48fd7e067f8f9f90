// Truncation strategies; see truncation.h.
#include "data/truncation.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::data {
namespace {

bool has_loss(const TokenizedSample& sample) {
  return std::any_of(sample.labels.begin() + (sample.labels.empty() ? 0 : 1), sample.labels.end(),
                     [](int32_t label) { return label != kIgnoreLabel; });
}

void keep(TokenizedSample sample, std::vector<TokenizedSample>& out, LengthStats& stats) {
  if (!sample.labels.empty()) sample.labels[0] = kIgnoreLabel;
  if (!sample.weights.empty()) sample.weights[0] = 0.0f;
  if (!has_loss(sample)) {
    ++stats.dropped["no loss tokens after truncation"];
    return;
  }
  out.push_back(std::move(sample));
}

TokenizedSample slice(const TokenizedSample& sample, size_t begin, size_t end) {
  TokenizedSample piece;
  piece.origin = sample.origin;
  piece.input_ids.assign(sample.input_ids.begin() + static_cast<long>(begin), sample.input_ids.begin() + static_cast<long>(end));
  piece.labels.assign(sample.labels.begin() + static_cast<long>(begin), sample.labels.begin() + static_cast<long>(end));
  if (!sample.weights.empty()) {
    piece.weights.assign(sample.weights.begin() + static_cast<long>(begin), sample.weights.begin() + static_cast<long>(end));
  }
  return piece;
}

}  // namespace

void fit_to_length(TokenizedSample sample, size_t max_length, TruncationStrategy strategy,
                   std::vector<TokenizedSample>& out, LengthStats& stats) {
  SUROGATE_CHECK(max_length > 0, "max_length must be positive");
  SUROGATE_CHECK(sample.input_ids.size() == sample.labels.size(), "labels and ids differ in length");
  size_t length = sample.input_ids.size();
  if (length == 0) {
    ++stats.dropped["no tokens"];
    return;
  }
  if (length <= max_length) {
    keep(std::move(sample), out, stats);
    return;
  }
  switch (strategy) {
    case TruncationStrategy::Delete:
      ++stats.dropped["longer than max_length (truncation_strategy: delete)"];
      return;
    case TruncationStrategy::Left:
      ++stats.truncated;
      keep(slice(sample, length - max_length, length), out, stats);
      return;
    case TruncationStrategy::Right:
      ++stats.truncated;
      keep(slice(sample, 0, max_length), out, stats);
      return;
    case TruncationStrategy::Split:
      ++stats.split;
      for (size_t begin = 0; begin < length; begin += max_length) {
        ++stats.split_pieces;
        keep(slice(sample, begin, std::min(length, begin + max_length)), out, stats);
      }
      return;
  }
}

}  // namespace surogate::data
