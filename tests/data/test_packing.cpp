// Truncation strategies, packing invariants (segments, positions, no cross-document loss),
// batches, the token cache (hit / stale / corrupt) and the resumable data loader.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/token_cache.h"
#include "data/truncation.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

TokenizedSample document(int32_t first, size_t length) {
  TokenizedSample sample;
  for (size_t i = 0; i < length; ++i) {
    sample.input_ids.push_back(first + static_cast<int32_t>(i));
    sample.labels.push_back(first + static_cast<int32_t>(i));
  }
  sample.labels[0] = kIgnoreLabel;
  return sample;
}

TEST(Truncation, EachStrategy) {
  LengthStats stats;
  std::vector<TokenizedSample> out;
  fit_to_length(document(0, 10), 4, TruncationStrategy::Delete, out, stats);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(stats.dropped.begin()->second, 1u);

  fit_to_length(document(0, 10), 4, TruncationStrategy::Left, out, stats);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].input_ids, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(out[0].labels, (std::vector<int32_t>{kIgnoreLabel, 7, 8, 9}));

  out.clear();
  fit_to_length(document(0, 10), 4, TruncationStrategy::Right, out, stats);
  EXPECT_EQ(out[0].input_ids, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(stats.truncated, 2u);

  out.clear();
  fit_to_length(document(0, 10), 4, TruncationStrategy::Split, out, stats);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].input_ids, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(out[1].labels, (std::vector<int32_t>{kIgnoreLabel, 5, 6, 7}));
  EXPECT_EQ(stats.split, 1u);
  EXPECT_EQ(stats.split_pieces, 3u);
}

TEST(Truncation, PieceWithoutLossIsDropped) {
  TokenizedSample sample = document(0, 6);
  for (size_t i = 0; i < 4; ++i) sample.labels[i] = kIgnoreLabel;  // loss on tokens 4, 5 only
  LengthStats stats;
  std::vector<TokenizedSample> out;
  fit_to_length(sample, 3, TruncationStrategy::Right, out, stats);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(stats.dropped["no loss tokens after truncation"], 1u);
}

void check_invariants(const PackedRows& rows, size_t documents_in) {
  const size_t T = rows.sequence_length;
  ASSERT_EQ(rows.input_ids.size(), rows.rows() * T);
  size_t documents = 0;
  for (size_t r = 0; r < rows.rows(); ++r) {
    size_t offset = r * T;
    for (uint64_t s = rows.row_segment_offsets[r]; s < rows.row_segment_offsets[r + 1]; ++s) {
      int32_t length = rows.segment_lengths[s];
      size_t size = static_cast<size_t>(std::abs(length));
      for (size_t p = 0; p < size; ++p) {
        if (length > 0) {
          EXPECT_EQ(rows.position_ids[offset + p], static_cast<int32_t>(p));  // positions restart per document
        } else {
          EXPECT_EQ(rows.labels[offset + p], kIgnoreLabel);
          EXPECT_EQ(rows.input_ids[offset + p], testing::kPad);
        }
      }
      if (length > 0) {
        EXPECT_EQ(rows.labels[offset], kIgnoreLabel);  // no loss across a document boundary
        ++documents;
      }
      offset += size;
    }
    EXPECT_EQ(offset, (r + 1) * T);  // segments cover the row exactly
  }
  EXPECT_EQ(documents, documents_in);
}

TEST(Packing, ModesKeepInvariants) {
  for (PackingMode mode : {PackingMode::BestFit, PackingMode::Sequential, PackingMode::OnePerRow}) {
    for (bool pad_left : {false, true}) {
      std::vector<TokenizedSample> documents;
      for (size_t i = 0; i < 40; ++i) documents.push_back(document(static_cast<int32_t>(i * 100), 1 + (i * 7) % 16));
      PackingOptions options{16, mode, pad_left, testing::kPad, 5};
      PackingStats stats;
      PackedRows rows = pack_documents(documents, options, stats);
      check_invariants(rows, 40);
      EXPECT_EQ(stats.documents, 40u);
      if (mode == PackingMode::OnePerRow) EXPECT_EQ(rows.rows(), 40u);
      if (mode == PackingMode::BestFit) EXPECT_GT(stats.efficiency(), 0.9);
      if (pad_left && mode == PackingMode::OnePerRow) EXPECT_LT(rows.segment_lengths[rows.row_segment_offsets[0]], 1 + 0);
    }
  }
}

TEST(Packing, BatchCuSeqlensAndDocumentIdsAreExact) {
  std::vector<TokenizedSample> documents = {document(0, 3), document(10, 2), document(20, 4)};
  PackingOptions options{5, PackingMode::Sequential, false, testing::kPad, 0};
  PackingStats stats;
  PackedRows rows = pack_documents(documents, options, stats);
  std::vector<uint64_t> all;
  for (uint64_t r = 0; r < rows.rows(); ++r) all.push_back(r);
  all.push_back(rows.rows());  // a padding-only row
  PackedBatch batch = make_batch(view_of(rows), all, testing::kPad);
  EXPECT_EQ(batch.batch_size, static_cast<int64_t>(rows.rows() + 1));
  EXPECT_EQ(batch.cu_seqlens.front(), 0);
  EXPECT_EQ(batch.cu_seqlens.back(), batch.batch_size * 5);
  EXPECT_EQ(batch.num_tokens, 9);
  EXPECT_EQ(batch.num_loss_tokens, 6);  // 9 tokens minus the 3 document starts
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    int32_t begin = batch.cu_seqlens[s];
    int32_t end = batch.cu_seqlens[s + 1];
    EXPECT_EQ(begin / 5, (end - 1) / 5);  // no segment crosses a row
    for (int32_t i = begin; i < end; ++i) EXPECT_EQ(batch.document_ids[i], batch.document_ids[begin]);
  }
}

TEST(Packing, FirstRowsViewTheLeadingRows) {
  std::vector<TokenizedSample> documents = {document(0, 3), document(10, 2), document(20, 4)};
  PackingStats stats;
  PackedRows rows = pack_documents(documents, PackingOptions{5, PackingMode::Sequential, false, testing::kPad, 0}, stats);
  ASSERT_EQ(rows.rows(), 2u);
  const PackedRowsView first = first_rows(view_of(rows), 1);
  EXPECT_EQ(first.rows(), 1u);
  EXPECT_EQ(first.input_ids.size(), 5u);
  const PackedBatch whole = make_batch(view_of(rows), std::vector<uint64_t>{0}, testing::kPad);
  const PackedBatch cut = make_batch(first, std::vector<uint64_t>{0}, testing::kPad);
  EXPECT_EQ(cut.input_ids, whole.input_ids);
  EXPECT_EQ(cut.cu_seqlens, whole.cu_seqlens);
  EXPECT_EQ(first_rows(view_of(rows), 10).rows(), 2u);  // at most every row
}

// Σ ℓ² over the documents / every token, padding included: what the recompute choice weighs
// re-running attention by.
TEST(Packing, AttentionSpanWeighsDocumentsByTheirSquaredLength) {
  std::vector<TokenizedSample> documents = {document(0, 3), document(10, 2), document(20, 4)};
  PackingStats stats;
  PackedRows rows = pack_documents(documents, PackingOptions{5, PackingMode::Sequential, false, testing::kPad, 0}, stats);
  ASSERT_EQ(rows.rows(), 2u);  // [3, 2] and [4, one pad]
  EXPECT_EQ(attention_span(view_of(rows)), 3);  // (9 + 4 + 16) / 10 = 2.9
  std::vector<TokenizedSample> whole = {document(0, 5), document(10, 5)};
  PackedRows full = pack_documents(whole, PackingOptions{5, PackingMode::OnePerRow, false, testing::kPad, 0}, stats);
  EXPECT_EQ(attention_span(view_of(full)), 5) << "a row that is one document: the row's length";
  EXPECT_EQ(attention_span(first_rows(view_of(full), 0)), 0);
}

PackedRows small_rows(size_t count, size_t T) {
  std::vector<TokenizedSample> documents;
  for (size_t i = 0; i < count; ++i) documents.push_back(document(static_cast<int32_t>(i * 10), T));
  PackingStats stats;
  return pack_documents(documents, PackingOptions{T, PackingMode::OnePerRow, false, testing::kPad, 1}, stats);
}

TEST(TokenCache, HitStaleAndCorrupt) {
  auto dir = testing::fresh_dir("cache");
  auto path = dir / "c.surotok";
  PackedRows train = small_rows(5, 4);
  PackedRows eval = small_rows(2, 4);
  write_token_cache(path, 42, train, eval, {{"note", "x"}});
  TokenCache::Problem problem;
  auto cache = TokenCache::open(path, 42, problem);
  ASSERT_TRUE(cache) << problem.reason;
  EXPECT_EQ(cache->train().rows(), 5u);
  EXPECT_EQ(cache->eval().rows(), 2u);
  EXPECT_TRUE(std::equal(train.input_ids.begin(), train.input_ids.end(), cache->train().input_ids.begin()));
  EXPECT_EQ(cache->report()["note"], "x");

  EXPECT_FALSE(TokenCache::open(path, 43, problem));
  EXPECT_NE(problem.reason.find("stale"), std::string::npos);

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string flipped = bytes;
  flipped[200] ^= 1;
  testing::write_file(path, flipped);
  EXPECT_FALSE(TokenCache::open(path, 42, problem));
  EXPECT_NE(problem.reason.find("checksum"), std::string::npos) << problem.reason;
  testing::write_file(path, bytes.substr(0, bytes.size() - 3));
  EXPECT_FALSE(TokenCache::open(path, 42, problem));
  EXPECT_NE(problem.reason.find("corrupt"), std::string::npos) << problem.reason;
  std::filesystem::remove(path);
  EXPECT_FALSE(TokenCache::open(path, 42, problem));
  EXPECT_EQ(problem.reason, "missing");
}

TEST(DataLoader, DeterministicPerEpochAndResumable) {
  auto dir = testing::fresh_dir("loader");
  write_token_cache(dir / "c.surotok", 1, small_rows(7, 4), small_rows(0, 4), {});
  TokenCache::Problem problem;
  std::shared_ptr<const TokenCache> cache = TokenCache::open(dir / "c.surotok", 1, problem);
  ASSERT_TRUE(cache) << problem.reason;
  DataLoader loader(cache, cache->train(), 3, 1234, testing::kPad);
  EXPECT_EQ(loader.batches_per_epoch(), 3u);
  std::vector<std::vector<int32_t>> epoch0;
  std::multiset<int32_t> firsts;
  for (int i = 0; i < 3; ++i) {
    PackedBatch batch = loader.next();
    epoch0.push_back(batch.input_ids);
    for (int64_t r = 0; r < batch.batch_size; ++r) firsts.insert(batch.input_ids[r * 4]);
  }
  EXPECT_EQ(loader.position(), (LoaderPosition{1, 0}));
  // Every row exactly once per epoch, the rest padding rows.
  for (int32_t i = 0; i < 7; ++i) EXPECT_EQ(firsts.count(i * 10), 1u);
  EXPECT_EQ(firsts.count(testing::kPad), 2u);
  std::vector<int32_t> epoch1_first = loader.next().input_ids;
  EXPECT_NE(epoch1_first, epoch0[0]);  // a new order each epoch (for this seed)

  DataLoader again(cache, cache->train(), 3, 1234, testing::kPad);
  again.seek({0, 1});
  EXPECT_EQ(again.next().input_ids, epoch0[1]);
  again.seek({1, 0});
  EXPECT_EQ(again.next().input_ids, epoch1_first);
  EXPECT_THROW(again.seek({0, 3}), UserError);
}

}  // namespace
}  // namespace surogate::data
