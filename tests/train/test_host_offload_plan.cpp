// The host-offload plan (train/device/host_offload_plan.h): which buffers leave the GPU, the
// chunks of the staged step and the size of its two GPU slots; and the memory estimate that the
// recompute choice and --dry-run read (train/device/memory_budget.h) moving the offloaded bytes
// from the device to the host.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "config/config.h"
#include "train/device/host_offload_plan.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

// Tensors laid out as the CUDA device lays them out: starts rounded up to 4 elements.
std::vector<TrainableExtent> layout(const std::vector<int64_t>& counts) {
  std::vector<TrainableExtent> extents;
  int64_t offset = 0;
  for (int64_t count : counts) {
    const int64_t padded = (count + 3) / 4 * 4;
    extents.push_back({offset, padded, count});
    offset += padded;
  }
  return extents;
}

// The offload options; the optimizer is adamw.
config::Offload offload(bool masters, bool optimizer, bool gradients, bool zero_copy = false) {
  config::Offload section;
  section.offload_master = masters;
  section.offload_optimizer = optimizer;
  section.offload_grads = gradients;
  section.use_zero_copy = zero_copy;
  return section;
}

TEST(HostOffloadPlan, NothingOffloadedByDefault) {
  const HostOffloadPlan plan = plan_host_offload(Config{}.offload, Config{}.optimizer.algorithm, layout({10, 20}));
  EXPECT_FALSE(plan.any());
  EXPECT_FALSE(plan.staged);
  EXPECT_EQ(plan.staging_bytes(), 0u);
}

TEST(HostOffloadPlan, GradientsAndZeroCopyAreNeverStaged) {
  EXPECT_FALSE(plan_host_offload(offload(false, false, true), Optimizer::AdamW, layout({10})).staged);
  const HostOffloadPlan plan = plan_host_offload(offload(true, true, false, true), Optimizer::AdamW, layout({10, 20}));
  EXPECT_TRUE(plan.masters && plan.optimizer && !plan.staged);
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(plan.staging_bytes(), 0u);
}

TEST(HostOffloadPlan, ChunksAreRunsOfWholeTensorsUnderTheChunkSizeThatCoverEveryTensorInOrder) {
  // adamw: 4 bytes of master and 8 of state per element; 8M elements is 96 MiB with both.
  const int64_t m = int64_t{1} << 20;
  const std::vector<int64_t> counts = {8 * m, 8 * m, 3, 8 * m, 40 * m, 1 * m, 7};
  const std::vector<TrainableExtent> extents = layout(counts);
  const HostOffloadPlan plan = plan_host_offload(offload(true, true, false), Optimizer::AdamW, extents);
  ASSERT_TRUE(plan.staged);
  ASSERT_FALSE(plan.chunks.empty());
  size_t next = 0;
  size_t largest_masters = 0;
  for (const HostOffloadPlan::Chunk& chunk : plan.chunks) {
    EXPECT_EQ(chunk.first, next);
    ASSERT_GT(chunk.end, chunk.first);
    next = chunk.end;
    // The chunk's span of the flat buffer is its tensors', padding included.
    EXPECT_EQ(chunk.master_offset, extents[chunk.first].offset);
    EXPECT_EQ(chunk.master_offset + chunk.master_count, extents[chunk.end - 1].offset + extents[chunk.end - 1].padded);
    size_t bytes = 0, state = 0;
    for (size_t i = chunk.first; i < chunk.end; ++i) {
      bytes += static_cast<size_t>(extents[i].padded) * 4 + staged_state_bytes(Optimizer::AdamW, counts[i]);
      state += staged_state_bytes(Optimizer::AdamW, counts[i]);
    }
    // Under the chunk size, unless one tensor alone is larger (the 40M one: 480 MiB).
    if (chunk.end - chunk.first > 1) EXPECT_LE(bytes, kOffloadChunkBytes);
    EXPECT_GE(chunk.state_bytes, state);  // room for 256-byte alignment of each state array
    EXPECT_LE(chunk.state_bytes, state + 4 * 256);
    EXPECT_LE(chunk.state_bytes, plan.slot_state_bytes);
    largest_masters = std::max(largest_masters, static_cast<size_t>(chunk.master_count) * 4);
  }
  EXPECT_EQ(next, counts.size());
  // Greedy: two neighbouring chunks would not have fit in one.
  EXPECT_EQ(plan.chunks.size(), 4u);  // {8M, 8M, 3}, {8M}, {40M}, {1M, 7}
  EXPECT_GE(plan.slot_master_bytes, largest_masters);
  EXPECT_LT(plan.slot_master_bytes, largest_masters + 256);
  EXPECT_EQ(plan.staging_bytes(), 2 * (plan.slot_master_bytes + plan.slot_state_bytes));
}

TEST(HostOffloadPlan, SlotsHoldOnlyWhatIsOffloaded) {
  const std::vector<TrainableExtent> extents = layout({1000, 2000});
  const HostOffloadPlan masters = plan_host_offload(offload(true, false, false), Optimizer::AdamW, extents);
  EXPECT_TRUE(masters.staged);
  EXPECT_EQ(masters.slot_state_bytes, 0u);
  EXPECT_GE(masters.slot_master_bytes, 3000u * 4);
  const HostOffloadPlan state = plan_host_offload(offload(false, true, false), Optimizer::AdamW, extents);
  EXPECT_EQ(state.slot_master_bytes, 0u);
  EXPECT_GE(state.slot_state_bytes, (1000u + 2000u) * 8);
}

TEST(HostOffloadPlan, StagedStateBytesFollowTheDeviceOptimizersLayout) {
  Config config;
  config.optimizer.algorithm = Optimizer::AdamW;
  // Two fp32 moments, rounded to 16-byte vectors.
  EXPECT_EQ(staged_state_bytes(config.optimizer.algorithm, 5), 2u * 8 * 4);
  config.optimizer.algorithm = Optimizer::AdamW8bit;
  // Two moments of one byte per element (rounded to 16) and an fp32 absmax per block each.
  const int64_t count = 5000;
  const auto blocks = static_cast<size_t>(quantization_blocks(count));
  EXPECT_EQ(staged_state_bytes(config.optimizer.algorithm, count), 2u * 5008 + 2 * ((blocks + 3) / 4 * 4) * 4);
}

}  // namespace
}  // namespace surogate::train
