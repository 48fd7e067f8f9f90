// The parallel layout over processes: each process drives `gpus` (or gpus_per_node) ranks and
// holds the global ranks [p·L, (p + 1)·L); its first GPU is device 0 when the launcher made
// exactly its GPUs visible, else LOCAL_RANK·L; distributed.num_nodes must match the processes;
// mistakes name the option or variable.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "core/error.h"
#include "distributed/parallel_layout.h"
#include "user_error_of.h"

namespace surogate::distributed {
namespace {

TEST(ParallelLayoutOverProcesses, ProcessesHoldConsecutiveRanks) {
  Config config;
  config.parallel.gpus = 2;
  const ParallelLayout layout = cpu_parallel_layout(config, {.rank = 1, .count = 3});
  EXPECT_EQ(layout.world_size, 6);
  EXPECT_EQ(layout.local_ranks, 2);
  EXPECT_EQ(layout.first_rank, 2);
  EXPECT_TRUE(layout.spans_processes());
  EXPECT_TRUE(layout.holds_rank(2) && layout.holds_rank(3));
  EXPECT_FALSE(layout.holds_rank(1) || layout.holds_rank(4));
  EXPECT_EQ(layout.describe(), "6 data-parallel ranks (3 processes × 2 ranks), ZeRO-1 (optimizer state sharded)");
  // One process: the layout of threads alone, as before.
  EXPECT_EQ(cpu_parallel_layout(config).describe(), "2 data-parallel ranks, ZeRO-1 (optimizer state sharded)");
  // Over processes, micro-batch i still goes to rank i mod N: process 1 of 3 trains 2, 3, 8, 9, ...
  for (int64_t index = 0; index < 12; ++index) {
    EXPECT_EQ(layout.holds_rank(owner_of_micro_batch(index, layout.world_size)), index % 6 == 2 || index % 6 == 3);
  }
}

TEST(ParallelLayoutOverProcesses, TheFirstGpuFollowsLocalRankUnlessTheLauncherRestrictedVisibility) {
  Config config;  // gpus: 1, one GPU per process (torchrun's way)
  EXPECT_EQ(gpu_parallel_layout(config, 8, {.rank = 5, .count = 8, .local_rank = 5, .local_count = 8}).first_device, 5);
  // srun --gpus-per-task=1 / Ray: exactly this process's GPU is visible.
  EXPECT_EQ(gpu_parallel_layout(config, 1, {.rank = 5, .count = 8, .local_rank = 5}).first_device, 0);
  // gpus: 0 shares the machine's GPUs among its processes.
  config.parallel.gpus = 0;
  ParallelLayout layout = gpu_parallel_layout(config, 8, {.rank = 3, .count = 4, .local_rank = 1, .local_count = 2});
  EXPECT_EQ(layout.local_ranks, 4);
  EXPECT_EQ(layout.first_device, 4);
  EXPECT_EQ(layout.first_rank, 12);
  EXPECT_EQ(layout.world_size, 16);
  EXPECT_NE(error_of([&] { gpu_parallel_layout(config, 8, {.rank = 0, .count = 3, .local_count = 3}); }).find("does not divide"),
            std::string::npos);
  config.parallel.gpus = 2;
  const std::string error = error_of([&] { gpu_parallel_layout(config, 4, {.rank = 2, .count = 4, .local_rank = 2}); });
  EXPECT_NE(error.find("LOCAL_RANK=2 with 2 GPUs per process needs GPUs 4–5, but 4 are visible"), std::string::npos) << error;
}

TEST(ParallelLayoutOverProcesses, NodesAreProcessesAndDriveGpusPerNode) {
  Config config;
  config.distributed.num_nodes = 2;
  config.distributed.gpus_per_node = 4;
  const ParallelLayout layout = gpu_parallel_layout(config, 4, {.rank = 1, .count = 2});
  EXPECT_EQ(layout.world_size, 8);
  EXPECT_EQ(layout.first_rank, 4);
  EXPECT_EQ(layout.first_device, 0);
  EXPECT_NO_THROW(check_nodes_match_processes(config.distributed, config.sources, {.rank = 1, .count = 2}));
  EXPECT_NE(error_of([&] {
              check_nodes_match_processes(config.distributed, config.sources, {});
            }).find("this process was started alone"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_nodes_match_processes(config.distributed, config.sources, {.rank = 0, .count = 3}); })
                .find("distributed.num_nodes: 2 runs one process per node, but the launcher started 3 processes"),
            std::string::npos);
}

}  // namespace
}  // namespace surogate::distributed
