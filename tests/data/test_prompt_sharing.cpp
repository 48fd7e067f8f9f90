// Prompt sharing's layout (data/prompt_sharing.h): a preference batch's rows with each prompt once,
// and the index tables that take its tokens to the rows as packed and back.
#include <gtest/gtest.h>

#include "data/prompt_sharing.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

constexpr int32_t I = kIgnoreLabel;

// One pair: prompt {7, 8, 9}, chosen completion {1, 2}, rejected {3}.
TokenizedSample pair_of(std::vector<int32_t> prompt, std::vector<int32_t> chosen, std::vector<int32_t> rejected) {
  TokenizedSample pair;
  for (const std::vector<int32_t>* completion : {&chosen, &rejected}) {
    for (int32_t id : prompt) {
      pair.input_ids.push_back(id);
      pair.labels.push_back(I);
    }
    for (int32_t id : *completion) {
      pair.input_ids.push_back(id);
      pair.labels.push_back(id);
    }
    if (completion == &chosen) pair.first_part = static_cast<int32_t>(pair.input_ids.size());
  }
  return pair;
}

PackedRows pack_pairs(std::vector<TokenizedSample> pairs, size_t length, bool pad_left = false) {
  PackingStats stats;
  PackingOptions options{length, PackingMode::OnePerRow, pad_left, testing::kPad, 0};
  options.keep_order = true;
  return pack_documents(std::move(pairs), options, stats);
}

TEST(PromptSharing, APairHoldsItsPromptOnce) {
  const PackedRows rows = pack_pairs({pair_of({7, 8, 9}, {1, 2}, {3})}, 12);
  // As packed: [7 8 9 1 2 | 7 8 9 3 | pad pad pad]; shared: the prefix {7, 8}, A = {9, 1, 2}, B = {9, 3}.
  EXPECT_EQ(longest_shared_row(view_of(rows)), 7);
  const PackedBatch packed = make_batch(view_of(rows), std::vector<uint64_t>{0}, testing::kPad);
  const PackedBatch shared = share_prompts(packed, 8, testing::kPad);
  EXPECT_EQ(shared.sequence_length, 8);
  EXPECT_EQ(shared.input_ids, (std::vector<int32_t>{7, 8, 9, 1, 2, 9, 3, testing::kPad}));
  EXPECT_EQ(shared.labels, (std::vector<int32_t>{I, I, I, 1, 2, I, 3, I}));
  EXPECT_EQ(shared.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 2, 3, 0}));
  const int32_t a = packed.document_ids[0], b = packed.document_ids[5];
  EXPECT_EQ(shared.document_ids, (std::vector<int32_t>{a, a, a, a, a, b, b, -1}));
  EXPECT_EQ(shared.cu_seqlens, (std::vector<int32_t>{0, 5, 7, 8}));
  EXPECT_EQ(shared.num_tokens, packed.num_tokens);  // the pair's two sequences in full
  EXPECT_EQ(shared.num_loss_tokens, 3);
  EXPECT_EQ(shared.rows, packed.rows);

  const SharedPromptLayout& layout = shared.shared_prompts;
  EXPECT_EQ(layout.expanded_length, 12);
  EXPECT_EQ(layout.expanded_document_ids, packed.document_ids);
  EXPECT_EQ(layout.expand_index, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 5, 6, -1, -1, -1}));
  EXPECT_EQ(layout.expand_sources, (std::vector<int32_t>{0, 5, 1, 6, 2, -1, 3, -1, 4, -1, 7, -1, 8, -1, -1, -1}));
  EXPECT_EQ(layout.take_index, (std::vector<int32_t>{0, 1, 2, 3, 4, 7, 8, -1}));
  EXPECT_EQ(layout.take_sources, (std::vector<int32_t>{0, 1, 2, 3, 4, -1, -1, 5, 6, -1, -1, -1}));
}

// Every packed token copies a shared token with its id and position; the tables invert each other.
void expect_consistent(const PackedBatch& packed, const PackedBatch& shared) {
  const SharedPromptLayout& layout = shared.shared_prompts;
  for (size_t j = 0; j < packed.input_ids.size(); ++j) {
    const int32_t s = layout.expand_index[j];
    if (packed.document_ids[j] < 0) {
      EXPECT_EQ(s, -1);
      continue;
    }
    ASSERT_GE(s, 0);
    EXPECT_EQ(shared.input_ids[static_cast<size_t>(s)], packed.input_ids[j]);
    EXPECT_EQ(shared.position_ids[static_cast<size_t>(s)], packed.position_ids[j]);
    const int32_t* sources = &layout.expand_sources[2 * static_cast<size_t>(s)];
    EXPECT_TRUE(sources[0] == static_cast<int32_t>(j) || sources[1] == static_cast<int32_t>(j));
    if (layout.take_sources[j] >= 0) EXPECT_EQ(layout.take_index[static_cast<size_t>(layout.take_sources[j])], static_cast<int32_t>(j));
  }
  for (size_t s = 0; s < shared.input_ids.size(); ++s) {
    const int32_t j = layout.take_index[s];
    if (j < 0) continue;
    EXPECT_EQ(layout.take_sources[static_cast<size_t>(j)], static_cast<int32_t>(s));
    EXPECT_EQ(layout.expand_index[static_cast<size_t>(j)], static_cast<int32_t>(s));
    // The token's target (the next token's label) is the packed token's, inside its document.
    if (s + 1 < shared.labels.size() && shared.document_ids[s + 1] == shared.document_ids[s] &&
        static_cast<size_t>(j) + 1 < packed.labels.size()) {
      EXPECT_EQ(shared.labels[s + 1], packed.labels[static_cast<size_t>(j) + 1]);
    }
  }
}

TEST(PromptSharing, RowsOfABatchAndPaddingRows) {
  const PackedRows rows = pack_pairs({pair_of({7, 8, 9, 10}, {1, 2, 3}, {4}), pair_of({5}, {6}, {11, 12})}, 12);
  EXPECT_EQ(longest_shared_row(view_of(rows)), 3 + 4 + 2);  // row 0: prefix 3, A 4, B 2
  // Rows 0, 1 and a padding row (index rows() = 2).
  const PackedBatch packed = make_batch(view_of(rows), std::vector<uint64_t>{0, 1, 2}, testing::kPad);
  const PackedBatch shared = share_prompts(packed, 9, testing::kPad);
  expect_consistent(packed, shared);
  // Row 1: prompt {5} alone shares nothing (its last token stays in both), shared [5 6 | 5 11 12].
  EXPECT_EQ(std::vector<int32_t>(shared.input_ids.begin() + 9, shared.input_ids.begin() + 14),
            (std::vector<int32_t>{5, 6, 5, 11, 12}));
  for (size_t s = 18; s < 27; ++s) EXPECT_EQ(shared.shared_prompts.take_index[s], -1);  // the padding row
}

TEST(PromptSharing, LeftPaddedRowsAndCommonCompletionStarts) {
  // Completions that start alike ({1, 2} and {1, 3}) share only the prompt: labelled tokens never.
  const PackedRows rows = pack_pairs({pair_of({7, 8}, {1, 2}, {1, 3})}, 10, true);
  EXPECT_EQ(longest_shared_row(view_of(rows)), 1 + 3 + 3);
  const PackedBatch packed = make_batch(view_of(rows), std::vector<uint64_t>{0}, testing::kPad);
  const PackedBatch shared = share_prompts(packed, 7, testing::kPad);
  EXPECT_EQ(shared.input_ids, (std::vector<int32_t>{7, 8, 1, 2, 8, 1, 3}));
  expect_consistent(packed, shared);
}

}  // namespace
}  // namespace surogate::data
