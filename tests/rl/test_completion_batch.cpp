// Completion padding and masks (src/rl/completion_batch.h), as TRL builds completion_mask and
// applies mask_truncated_completions.
#include <gtest/gtest.h>

#include "rl/completion_batch.h"

namespace surogate::rl {
namespace {

constexpr int32_t kEos = 9, kPad = 0;

TEST(CompletionBatch, PaddedRowsMaskedAfterTheFirstEos) {
  const CompletionBatch batch = completion_batch({{5, 6, kEos}, {5, kEos}, {5, 6, 7, 8}}, {kEos, 10}, kPad, false);
  EXPECT_EQ(batch.sequences, 3);
  EXPECT_EQ(batch.tokens, 4);
  EXPECT_EQ(batch.ids, (std::vector<int32_t>{5, 6, kEos, kPad, 5, kEos, kPad, kPad, 5, 6, 7, 8}));
  EXPECT_EQ(batch.mask, (std::vector<float>{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(batch.truncated, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(batch.masked_tokens(), 9);
}

TEST(CompletionBatch, MaskTruncatedCompletionsZeroesThem) {
  const CompletionBatch batch = completion_batch({{5, kEos}, {5, 6, 7}, {5, 10}}, {kEos, 10}, kPad, true);
  EXPECT_EQ(batch.mask, (std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(batch.masked_tokens(), 4);
}

}  // namespace
}  // namespace surogate::rl
