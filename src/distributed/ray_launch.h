// Multi-node training through Ray (distributed.num_nodes > 1): `surogate sft` / `surogate pt`
// hands the run to the Ray driver (ray_driver.py, compiled into the binary) by exec'ing Python
// on it. The driver places one worker per node and starts this same binary and command on each
// with the launcher variables (launcher_environment.h), so every node runs the engine as one
// process of a world of num_nodes processes. A user runs `surogate sft config.yaml` as always.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::distributed {

struct RayLaunch {
  std::vector<std::string> command;  // what each node runs after the binary: {"sft", "config.yaml", overrides...}
  int64_t num_nodes = 2;
  int64_t gpus_per_node = 0;         // GPUs each node's worker takes (0: all of a node's GPUs)
  std::string ray_address = "auto";  // "auto", "local", "ray://host:port" or a cluster's "host:port"
};

// Replaces this process with `python3 -c <driver> ...` (SUROGATE_PYTHON names another Python;
// SUROGATE_RAY_PLACEMENT_TIMEOUT, in seconds, how long the driver waits for the cluster to place
// the workers, default 300). Returns only by throwing: a UserError when Python cannot be started.
[[noreturn]] void launch_through_ray(const RayLaunch& launch);

// The driver's source (generated from ray_driver.py at build time).
extern const char* const kRayDriverScript;

}  // namespace surogate::distributed
