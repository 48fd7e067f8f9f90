// The parallel layout; see parallel_layout.h.
#include "distributed/parallel_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::distributed {

std::string ParallelLayout::describe() const {
  if (!data_parallel()) return "1 rank";
  return fmt::format("{} data-parallel ranks, ZeRO-{} (optimizer state sharded)", world_size, zero_level);
}

ParallelLayout cpu_parallel_layout(const Config& config) {
  ParallelLayout layout;
  layout.world_size = config.gpus > 1 ? static_cast<int>(config.gpus) : 1;
  layout.zero_level = static_cast<int>(config.zero_level);
  SUROGATE_CHECK(layout.zero_level == 1, "only ZeRO-1 is implemented; config checks reject the others");
  return layout;
}

}  // namespace surogate::distributed
