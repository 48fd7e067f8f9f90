// The shard placement: contiguous runs of whole units covering the flat buffer once, balanced
// by the units' midpoints, empty shards where a unit is larger than a share.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "distributed/parallel_layout.h"
#include "distributed/shard_placement.h"

namespace surogate::distributed {
namespace {

void expect_covering(const std::vector<Shard>& shards, const std::vector<size_t>& units) {
  size_t unit = 0, offset = 0;
  for (const Shard& shard : shards) {
    EXPECT_EQ(shard.first_unit, unit);
    EXPECT_EQ(shard.begin, offset);
    for (; unit < shard.end_unit; ++unit) offset += units[unit];
    EXPECT_EQ(shard.end, offset);
  }
  EXPECT_EQ(unit, units.size());
  EXPECT_EQ(offset, std::accumulate(units.begin(), units.end(), size_t{0}));
}

TEST(ShardPlacement, OneRankOwnsEverything) {
  std::vector<size_t> units{3, 5, 7};
  std::vector<Shard> shards = place_shards(units, 1);
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].first_unit, 0u);
  EXPECT_EQ(shards[0].end_unit, 3u);
  EXPECT_EQ(shards[0].size(), 15u);
}

TEST(ShardPlacement, EqualUnitsSplitEvenly) {
  std::vector<size_t> units(12, 10);
  for (int world : {2, 3, 4, 6}) {
    std::vector<Shard> shards = place_shards(units, world);
    ASSERT_EQ(shards.size(), static_cast<size_t>(world));
    expect_covering(shards, units);
    for (const Shard& shard : shards) EXPECT_EQ(shard.end_unit - shard.first_unit, 12u / world) << world;
  }
}

TEST(ShardPlacement, AUnitGoesToTheShareHoldingItsMidpoint) {
  // Total 100, two ranks share [0, 50) and [50, 100): midpoints 20, 45, 60, 90.
  std::vector<size_t> units{40, 10, 20, 30};
  std::vector<Shard> shards = place_shards(units, 2);
  expect_covering(shards, units);
  EXPECT_EQ(shards[0].end_unit, 2u);
  EXPECT_EQ(shards[0].size(), 50u);
  EXPECT_EQ(shards[1].size(), 50u);
}

TEST(ShardPlacement, ALargeUnitLeavesARankEmpty) {
  std::vector<size_t> units{1000, 1, 1};
  std::vector<Shard> shards = place_shards(units, 3);
  expect_covering(shards, units);
  EXPECT_EQ(shards[1].size(), 1000u);  // midpoint 500 of 1002 is in rank 1's share
  EXPECT_EQ(shards[0].size(), 0u);
  EXPECT_EQ(shards[2].end_unit - shards[2].first_unit, 2u);
  EXPECT_EQ(shard_sizes(shards), (std::vector<size_t>{0, 1000, 2}));
}

TEST(ShardPlacement, MoreRanksThanUnitsAndNoUnits) {
  std::vector<size_t> units{5, 5};
  std::vector<Shard> shards = place_shards(units, 5);
  expect_covering(shards, units);
  std::vector<Shard> none = place_shards(std::vector<size_t>{}, 3);
  expect_covering(none, {});
}

TEST(ShardPlacement, RandomUnitsAreCoveredAndBalanced) {
  std::mt19937 generator(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> units(1 + generator() % 40);
    for (size_t& unit : units) unit = 1 + generator() % 100;
    const int world = 1 + static_cast<int>(generator() % 8);
    std::vector<Shard> shards = place_shards(units, world);
    ASSERT_EQ(shards.size(), static_cast<size_t>(world));
    expect_covering(shards, units);
    // A shard exceeds the even share by at most half of each of its two boundary units.
    const size_t total = shards.back().end;
    for (const Shard& shard : shards) EXPECT_LE(shard.size(), total / world + 100 + 1);
  }
}

TEST(ParallelLayout, MicroBatchesGoToRanksRoundRobin) {
  EXPECT_EQ(owner_of_micro_batch(0, 2), 0);
  EXPECT_EQ(owner_of_micro_batch(3, 2), 1);
  EXPECT_EQ(owner_of_micro_batch(5, 3), 2);
  EXPECT_EQ(owner_of_micro_batch(7, 1), 0);
}

}  // namespace
}  // namespace surogate::distributed
