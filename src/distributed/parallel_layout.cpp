// The parallel layout; see parallel_layout.h.
#include "distributed/parallel_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {

std::string ParallelLayout::describe() const {
  if (!data_parallel()) return "1 rank";
  return fmt::format("{} data-parallel ranks, ZeRO-{} ({})", world_size, shard_gradients ? 2 : 1,
                     shard_gradients ? "optimizer state and gradients sharded" : "optimizer state sharded");
}

namespace {

ParallelLayout layout_of(const Config& config, int world_size) {
  ParallelLayout layout;
  layout.world_size = std::max(1, world_size);
  layout.zero_level = static_cast<int>(config.zero_level);
  layout.shard_gradients = config.shard_gradients || config.zero_level >= 2;
  SUROGATE_CHECK(layout.zero_level <= 2 && !config.shard_weights, "ZeRO-3 is not implemented; config checks reject it");
  return layout;
}

}  // namespace

ParallelLayout cpu_parallel_layout(const Config& config) {
  return layout_of(config, config.gpus > 1 ? static_cast<int>(config.gpus) : 1);
}

ParallelLayout gpu_parallel_layout(const Config& config, int visible_gpus) {
  return layout_of(config, config.gpus == 0 ? visible_gpus : static_cast<int>(config.gpus));
}

}  // namespace surogate::distributed
