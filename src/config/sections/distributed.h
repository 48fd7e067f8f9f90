// The `distributed` mapping: multi-node runs (one process per node, started through Ray or by a
// launcher). Fields are named exactly as their options in docs/configuration.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace surogate {

struct DistributedConfig {
  std::string ray_address = "auto";
  int64_t num_nodes = 1;
  int64_t gpus_per_node = 0;
  std::optional<std::string> worker_output_dir;
};

}  // namespace surogate
