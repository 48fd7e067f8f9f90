// The parallel layout of a training run, described once: how many ranks train together and how
// their state is sharded. Today that is data parallelism over `world_size` ranks with ZeRO-1
// (each rank keeps the whole model and gradients, and the optimizer state of its shard only) or
// ZeRO-2 (`shard_gradients`: the gradients are reduce-scattered, each rank keeping the summed
// gradients of its shard only); sequence and pipeline parallelism and ZeRO-3 extend this struct
// when they land.
//
// Data: one optimizer step reads the global window of gradient_accumulation_steps × world_size
// micro-batches from the one deterministic loader order; micro-batch i of the window belongs to
// rank i mod world_size (owner_of_micro_batch). So N ranks see exactly the micro-batches one rank
// with N times the accumulation sees, and the order does not depend on timing.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace surogate::distributed {

struct ParallelLayout {
  int world_size = 1;  // data-parallel ranks
  int zero_level = 1;            // 1: optimizer state sharded; 2: and gradients
  bool shard_gradients = false;  // zero_level >= 2 or shard_gradients: reduce-scatter, not all-reduce
  bool data_parallel() const { return world_size > 1; }
  std::string describe() const;  // "2 data-parallel ranks, ZeRO-1 (optimizer state sharded)"
};

// The layout of a run on CPU ranks: `gpus: N` (N > 1) asks for N ranks; 0 and 1 mean one rank
// (no GPU is visible, so "every visible GPU" is none and the run trains on one CPU rank).
ParallelLayout cpu_parallel_layout(const Config& config);
// The layout of a run on GPUs: `gpus: N` asks for GPUs 0..N-1, `gpus: 0` for every visible one.
// The caller (train/device/backend_selection.cpp) has checked that N GPUs are visible.
ParallelLayout gpu_parallel_layout(const Config& config, int visible_gpus);

// Which rank trains micro-batch `index` (0-based, within one optimizer step's window).
inline int owner_of_micro_batch(int64_t index, int world_size) {
  return static_cast<int>(index % static_cast<int64_t>(world_size));
}

}  // namespace surogate::distributed
