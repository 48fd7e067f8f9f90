// ZeRO-2/3's bucket cut and staging arithmetic (train/device/sharded_gradients.h): a tensor larger
// than a bucket is split into buckets of its own, so a staging slot stays under two buckets
// whatever the embedding's size; ZeRO-1's cut (split off) keeps whole tensors as before; the
// memory estimate's per-rank figure is the largest shard plus the slots of the largest bucket.
#include <gtest/gtest.h>

#include <vector>

#include "train/device/sharded_gradients.h"

namespace surogate::train {
namespace {

TEST(ShardedGradients, ATensorLargerThanABucketIsSplitOnlyWhenAsked) {
  const std::vector<size_t> sizes = {3, 4, 25, 2, 6};
  const std::vector<GradientBucket> whole = cut_gradient_buckets(sizes, 8);
  ASSERT_EQ(whole.size(), 2u);  // [3 4 25] closes past 8, then [2 6]
  EXPECT_EQ(whole[0].end, 32u);
  const std::vector<GradientBucket> split = cut_gradient_buckets(sizes, 8, true);
  // [3 4], the 25 as 8 + 8 + 8 + 1, then [2 6].
  ASSERT_EQ(split.size(), 6u);
  EXPECT_EQ(split[0].begin, 0u);
  EXPECT_EQ(split[0].end, 7u);
  for (size_t b = 1; b <= 4; ++b) {
    EXPECT_EQ(split[b].first_unit, 2u);
    EXPECT_EQ(split[b].end_unit, 3u);
    EXPECT_EQ(split[b].begin, 7 + 8 * (b - 1));
  }
  EXPECT_EQ(split[4].size(), 1u);
  EXPECT_EQ(split[5].first_unit, 3u);
  EXPECT_EQ(split[5].end, 40u);
  EXPECT_EQ(largest_bucket_elements(split), 8u);
  // The second chunk of the 25-element tensor: elements 8..16 of it, at the bucket's start.
  const BucketSegment segment = bucket_segment(split[2], 7, 25);
  EXPECT_EQ(segment.from, 8u);
  EXPECT_EQ(segment.into, 0u);
  EXPECT_EQ(segment.count, 8u);
  EXPECT_EQ(bucket_segment(split[2], 32, 2).count, 0u);
}

TEST(ShardedGradients, ARankKeepsItsShardAndTheStagingSlots) {
  const std::vector<size_t> sizes(12, 100);  // 1200 elements over 4 ranks: 300 each
  EXPECT_EQ(sharded_accumulator_elements(sizes, 4, 250, 2), 300u + 2 * 300u);  // buckets of 3 tensors
  EXPECT_EQ(sharded_accumulator_elements(sizes, 4, 64, 1), 300u + 64u);  // each tensor split 64 + 36
  // Against a rank owning nothing of it, a reduced piece is empty.
  const GradientBucket bucket{0, 2, 0, 200, 0, {}};
  EXPECT_EQ(owned_piece(bucket, distributed::Shard{3, 6, 300, 600}).size(), 0u);
  EXPECT_EQ(owned_piece(bucket, distributed::Shard{1, 3, 100, 300}).size(), 100u);
}

}  // namespace
}  // namespace surogate::train
