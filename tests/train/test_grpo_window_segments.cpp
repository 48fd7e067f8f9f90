// train/objective/grpo_window.h's rows against the segment bound the GRPO run lays cuDNN's
// packed-documents attention out for (kGrpoSegmentsPerRow): a row with padding has exactly two
// segments (prompt + completion, then the padding), a full row one, none more; the padding run is
// one segment, not one per token.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rl/completion_batch.h"
#include "train/objective/grpo_window.h"

namespace surogate::train {
namespace {

// Segments of row `row` of a batch: the cu_seqlens offsets that start inside it.
int64_t segments_of(const data::PackedBatch& batch, int64_t row) {
  const int64_t T = batch.sequence_length;
  int64_t count = 0;
  for (size_t i = 0; i + 1 < batch.cu_seqlens.size(); ++i) {
    const int64_t start = batch.cu_seqlens[i];
    count += start >= row * T && start < (row + 1) * T ? 1 : 0;
  }
  return count;
}

TEST(GrpoWindowSegments, EveryRowHasAtMostTheBoundAndPaddingIsOneSegment) {
  constexpr int64_t kSequence = 12;
  // Completion lengths: short (padding follows), filling the row exactly, and empty but for EOS.
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {5, 6, 7, 8}, {9, 10}, {11}};
  const std::vector<std::vector<int32_t>> completion_ids = {{20, 21}, {22, 23, 24, 25, 26, 27, 28, 29}, {30}, {31, 32, 33}};
  const rl::CompletionBatch completions = rl::completion_batch(completion_ids, {}, 0, false);
  const std::vector<double> advantages = {0.5, -0.5, 1.0, -1.0};
  const GrpoWindow window = grpo_window(prompts, completion_ids, completions, advantages, {}, 2, kSequence, 0);
  ASSERT_EQ(window.batches.size(), 2u);
  std::vector<int64_t> counts;
  for (const data::PackedBatch& batch : window.batches) {
    for (int64_t row = 0; row < batch.batch_size; ++row) counts.push_back(segments_of(batch, row));
  }
  // Row 1 (4 + 8 = 12 tokens) fills its row: one segment; the others have padding after them: two.
  EXPECT_EQ(counts, (std::vector<int64_t>{2, 1, 2, 2}));
  for (int64_t count : counts) EXPECT_LE(count, kGrpoSegmentsPerRow);
}

}  // namespace
}  // namespace surogate::train
