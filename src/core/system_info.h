// Facts about the host machine, for `surogate info` and for sizing thread pools.
#pragma once

#include <cstdint>
#include <string>

namespace surogate {

struct HostInfo {
  std::string cpu_model;
  int logical_cores = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_available_bytes = 0;
};

HostInfo query_host_info();

}  // namespace surogate
