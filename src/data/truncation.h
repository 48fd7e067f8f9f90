// Fitting documents to max_length (truncation_strategy):
//   delete  a document longer than max_length is dropped (counted, with the reason);
//   left    the first tokens are cut so the last max_length remain;
//   right   the last tokens are cut so the first max_length remain;
//   split   the document becomes consecutive pieces of at most max_length tokens.
// Every resulting document gets labels[0] = -100 again (sample.h), and a piece without any loss
// token is dropped ("no loss tokens after truncation"), since it would only cost compute.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config_enums.h"
#include "data/sample.h"

namespace surogate::data {

struct LengthStats {
  uint64_t truncated = 0;        // documents cut by left / right
  uint64_t split = 0;            // documents cut into pieces by split
  uint64_t split_pieces = 0;     // pieces produced by split
  std::map<std::string, uint64_t> dropped;  // reason → count
};

// Appends the fitted document(s) to `out`.
void fit_to_length(TokenizedSample sample, size_t max_length, TruncationStrategy strategy,
                   std::vector<TokenizedSample>& out, LengthStats& stats);

}  // namespace surogate::data
