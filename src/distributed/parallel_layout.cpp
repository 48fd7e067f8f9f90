// The parallel layout; see parallel_layout.h.
#include "distributed/parallel_layout.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "distributed/process_world.h"

namespace surogate::distributed {

ProcessPlacement process_placement(const ProcessWorld* world) {
  if (world == nullptr) return {};
  return {world->rank(), world->size(), world->local_rank(), world->spec().local_size};
}

std::string ParallelLayout::describe() const {
  if (!several_ranks()) return "1 rank";
  const std::string spread =
      spans_processes() ? fmt::format(" ({} processes × {} rank{})", processes, local_ranks, local_ranks == 1 ? "" : "s")
                        : std::string();
  const int level = shard_weights ? 3 : shard_gradients ? 2 : 1;
  const char* sharded = shard_weights     ? "weights, gradients and optimizer state sharded; weights gathered per layer"
                        : shard_gradients ? "optimizer state and gradients sharded"
                                          : "optimizer state sharded";
  const std::string zero = fmt::format("ZeRO-{} ({})", level, sharded);
  if (sequence_size == 1 && pipeline_size == 1) return fmt::format("{} data-parallel ranks{}, {}", world_size, spread, zero);
  std::vector<std::string> factors;
  if (data_size > 1) factors.push_back(fmt::format("{} data-parallel", data_size));
  if (sequence_size > 1) factors.push_back(fmt::format("{} sequence-parallel", sequence_size));
  if (pipeline_size > 1) factors.push_back(fmt::format("{} pipeline stages", pipeline_size));
  const std::string sharding = gradient_group_size() > 1 ? ", " + zero : std::string();
  return fmt::format("{} ranks ({}){}{}", world_size, fmt::join(factors, " × "), spread, sharding);
}

namespace {

// The ranks each process drives as `gpus` (or gpus_per_node) asks; 0 = every visible GPU.
int64_t requested_local_ranks(const Config& config) {
  if (config.distributed.num_nodes > 1 && config.distributed.gpus_per_node > 0) return config.distributed.gpus_per_node;
  return config.parallel.gpus;
}

ParallelLayout layout_of(const Config& config, int local_ranks, const ProcessPlacement& placement) {
  ParallelLayout layout;
  layout.processes = placement.count;
  layout.local_ranks = std::max(1, local_ranks);
  layout.first_rank = placement.rank * layout.local_ranks;
  layout.world_size = layout.local_ranks * placement.count;
  layout.sequence_size = static_cast<int>(std::max<int64_t>(1, config.parallel.sequence_parallel_size));
  layout.pipeline_size = static_cast<int>(std::max<int64_t>(1, config.parallel.pipeline_parallel_size));
  const int split = layout.sequence_size * layout.pipeline_size;
  if (layout.world_size % split != 0) {
    const std::string which = layout.sequence_size > 1 && layout.pipeline_size > 1
                                  ? fmt::format("sequence_parallel_size × pipeline_parallel_size = {} × {}",
                                                layout.sequence_size, layout.pipeline_size)
                              : layout.sequence_size > 1 ? fmt::format("sequence_parallel_size: {}", layout.sequence_size)
                                                         : fmt::format("pipeline_parallel_size: {}", layout.pipeline_size);
    fail_user("{}: {} needs the ranks to be a multiple of {}, but this run has {} rank{}{}; set gpus to a multiple of {} "
              "(the data-parallel replicas are what remains: gpus = data × sequence × pipeline)",
              config.sources.of(layout.sequence_size > 1 ? "sequence_parallel_size" : "pipeline_parallel_size"), which,
              split, layout.world_size, layout.world_size == 1 ? "" : "s",
              layout.spans_processes() ? fmt::format(" ({} processes × {})", layout.processes, layout.local_ranks)
                                       : fmt::format(" (gpus: {})", config.parallel.gpus),
              split);
  }
  layout.data_size = layout.world_size / split;
  layout.zero_level = static_cast<int>(config.parallel.zero_level);
  // A rank keeps the weights it steps; the others' gradients it never needs (ZeRO-2's reduce-scatter).
  layout.shard_weights = config.parallel.shard_weights || config.parallel.zero_level >= 3;
  layout.shard_gradients = config.parallel.shard_gradients || config.parallel.zero_level >= 2 || layout.shard_weights;
  return layout;
}

}  // namespace

void check_nodes_match_processes(const DistributedConfig& nodes, const ConfigSources& sources,
                                 const ProcessPlacement& placement) {
  if (nodes.num_nodes > 1 && placement.count != nodes.num_nodes) {
    if (placement.count == 1) {
      fail_user("{}: distributed.num_nodes: {} trains on {} machines, but this process was started alone: `surogate "
                "sft` / `surogate pt` start the nodes through Ray themselves, or start one process per node with the "
                "launcher variables (RANK, WORLD_SIZE={}, MASTER_ADDR, MASTER_PORT)",
                sources.of("distributed.num_nodes"), nodes.num_nodes, nodes.num_nodes, nodes.num_nodes);
    }
    fail_user("{}: distributed.num_nodes: {} runs one process per node, but the launcher started {} processes "
              "(WORLD_SIZE); make them agree, or leave num_nodes at 1 to run one process per GPU",
              sources.of("distributed.num_nodes"), nodes.num_nodes, placement.count);
  }
}

ParallelLayout cpu_parallel_layout(const Config& config, const ProcessPlacement& placement) {
  const int64_t requested = requested_local_ranks(config);
  return layout_of(config, requested > 1 ? static_cast<int>(requested) : 1, placement);
}

ParallelLayout gpu_parallel_layout(const Config& config, int visible_gpus, const ProcessPlacement& placement) {
  const int64_t requested = requested_local_ranks(config);
  int local = static_cast<int>(requested);
  if (requested == 0) {
    const int sharing = std::max(1, placement.local_count);
    if (visible_gpus % sharing != 0 || visible_gpus < sharing) {
      fail_user("{}: gpus: 0 shares the {} visible GPUs among the {} processes of this machine (LOCAL_WORLD_SIZE), "
                "which does not divide evenly; set gpus to the GPUs each process drives (gpus: 1 for one process "
                "per GPU)", config.sources.of("gpus"), visible_gpus, sharing);
    }
    local = visible_gpus / sharing;
  }
  ParallelLayout layout = layout_of(config, local, placement);
  if (placement.count > 1 && visible_gpus != layout.local_ranks) {
    layout.first_device = placement.local_rank * layout.local_ranks;
    if (layout.first_device + layout.local_ranks > visible_gpus) {
      fail_user("LOCAL_RANK={} with {} GPU{} per process needs GPUs {}–{}, but {} {} visible; start at most {} "
                "processes on this machine, or set gpus to the GPUs each process drives",
                placement.local_rank, layout.local_ranks, layout.local_ranks == 1 ? "" : "s", layout.first_device,
                layout.first_device + layout.local_ranks - 1, visible_gpus, visible_gpus == 1 ? "is" : "are",
                visible_gpus / layout.local_ranks);
    }
  }
  return layout;
}

}  // namespace surogate::distributed
