// The parallel layout; see parallel_layout.h.
#include "distributed/parallel_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {

std::string ParallelLayout::describe() const {
  if (!data_parallel()) return "1 rank";
  return fmt::format("{} data-parallel ranks, ZeRO-{} ({})", world_size, shard_gradients ? 2 : 1,
                     shard_gradients ? "optimizer state and gradients sharded" : "optimizer state sharded");
}

ParallelLayout cpu_parallel_layout(const Config& config) {
  ParallelLayout layout;
  layout.world_size = config.gpus > 1 ? static_cast<int>(config.gpus) : 1;
  layout.zero_level = static_cast<int>(config.zero_level);
  layout.shard_gradients = config.shard_gradients || config.zero_level >= 2;
  SUROGATE_CHECK(layout.zero_level <= 2 && !config.shard_weights, "ZeRO-3 is not implemented; config checks reject it");
  return layout;
}

}  // namespace surogate::distributed
