// Configuration section: how the work is split over GPUs: replicas with ZeRO sharding, sequence
// groups, pipeline stages.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <vector>

namespace surogate::config {

struct Parallel {
  int64_t gpus = 1;
  int64_t zero_level = 1;
  bool shard_weights = false;
  bool shard_gradients = false;
  bool use_all_to_all_reduce = false;
  bool memcpy_all_gather = false;
  bool memcpy_send_recv = false;
  int64_t sequence_parallel_size = 1;
  // Addition (docs/configuration.md): pipeline parallelism, the decoder's layers split into stages.
  int64_t pipeline_parallel_size = 1;
  std::vector<int64_t> pipeline_stage_layers;       // layers of each stage; empty: balanced by cost
};

}  // namespace surogate::config
