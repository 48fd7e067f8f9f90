// The packed batch the GPU decoder tests feed: `rows` rows of `sequence` random tokens, each row two
// documents (the second starts at `first_split` in row 0, at `other_split` in the others), positions
// restarting per document, and no target for a document's last token (-100). `Batch` is any struct
// with int32 vectors input_ids, position_ids, document_ids and targets; they are appended to, in
// the order the tests always drew the tokens (so their random values are unchanged).
#pragma once

#include <cstdint>
#include <random>

namespace surogate {

template <typename Batch>
void append_two_document_rows(Batch& batch, int64_t vocab_size, int64_t rows, int64_t sequence, int64_t first_split,
                              int64_t other_split, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab_size - 1));
  const size_t start = batch.input_ids.size();
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t split = row == 0 ? first_split : other_split;
    for (int64_t t = 0; t < sequence; ++t) {
      batch.input_ids.push_back(token(rng));
      batch.position_ids.push_back(static_cast<int32_t>(t < split ? t : t - split));
      batch.document_ids.push_back(t < split ? 0 : 1);
    }
    for (int64_t t = 0; t < sequence; ++t) {
      const bool last = t == split - 1 || t == sequence - 1;
      batch.targets.push_back(last ? -100 : batch.input_ids[start + static_cast<size_t>(row * sequence + t + 1)]);
    }
  }
}

}  // namespace surogate
