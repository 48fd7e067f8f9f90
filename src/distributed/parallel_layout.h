// The parallel layout of a training run, described once: how many ranks train together, where
// this process's ranks sit among them, and how their state is sharded. Today that is data
// parallelism over `world_size` ranks with ZeRO-1 (each rank keeps the whole model and gradients,
// and the optimizer state of its shard only) or ZeRO-2 (`shard_gradients`: the gradients are
// reduce-scattered, each rank keeping the summed gradients of its shard only); sequence and
// pipeline parallelism and ZeRO-3 extend this struct when they land.
//
// Ranks and processes: a run is one process or a world of processes (process_world.h), and each
// process drives the same number of rank threads — `gpus` of them (`distributed.gpus_per_node`
// when set, with `distributed.num_nodes` > 1, where each process is one node). Process p holds the
// global ranks [p·L, (p + 1)·L). On GPUs its first rank uses CUDA device 0 when the launcher made
// exactly its L GPUs visible (srun --gpus-per-task, Ray), else device LOCAL_RANK·L (torchrun).
//
// Data: one optimizer step reads the global window of gradient_accumulation_steps × world_size
// micro-batches from the one deterministic loader order; micro-batch i of the window belongs to
// rank i mod world_size (owner_of_micro_batch). So N ranks see exactly the micro-batches one rank
// with N times the accumulation sees, and the order depends neither on timing nor on how the
// ranks are spread over processes.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace surogate::distributed {

// Where this process stands among the processes of the run (process_world.h).
struct ProcessPlacement {
  int rank = 0;         // this process
  int count = 1;        // processes of the run
  int local_rank = 0;   // among the processes of its machine (LOCAL_RANK)
  int local_count = 0;  // processes on its machine (LOCAL_WORLD_SIZE); 0 when unknown
};

class ProcessWorld;
// The placement of this process in `world` (null: a process alone).
ProcessPlacement process_placement(const ProcessWorld* world);

struct ParallelLayout {
  int world_size = 1;    // data-parallel ranks of all processes together
  int local_ranks = 1;   // the ranks this process drives (one thread each)
  int first_rank = 0;    // the global rank of this process's first rank
  int first_device = 0;  // GPUs: the CUDA device of this process's first rank
  int processes = 1;
  int zero_level = 1;            // 1: optimizer state sharded; 2: and gradients
  bool shard_gradients = false;  // zero_level >= 2 or shard_gradients: reduce-scatter, not all-reduce
  bool data_parallel() const { return world_size > 1; }
  bool spans_processes() const { return processes > 1; }
  bool holds_rank(int rank) const { return rank >= first_rank && rank < first_rank + local_ranks; }
  // "2 data-parallel ranks, ZeRO-1 (optimizer state sharded)", with "(2 processes × 1 rank)" when spread.
  std::string describe() const;
};

// The layout of a run on CPU ranks: `gpus: N` (N > 1) asks for N rank threads per process; 0 and 1
// mean one (no GPU is visible, so "every visible GPU" is none and each process trains one CPU rank).
ParallelLayout cpu_parallel_layout(const Config& config, const ProcessPlacement& placement = {});
// The layout of a run on GPUs: `gpus: N` asks for N GPUs per process, `gpus: 0` for every visible
// one (shared out among the LOCAL_WORLD_SIZE processes of a machine). The caller
// (train/device/backend_selection.cpp) has checked that `gpus` GPUs are visible; a process whose
// GPUs (from LOCAL_RANK) are not all visible is a UserError naming LOCAL_RANK.
ParallelLayout gpu_parallel_layout(const Config& config, int visible_gpus, const ProcessPlacement& placement = {});

// With distributed.num_nodes > 1 each process is one node: a UserError naming the option unless
// the launcher started exactly num_nodes processes (a lone process means it was not launched).
void check_nodes_match_processes(const Config& config, const ProcessPlacement& placement);

// Which rank trains micro-batch `index` (0-based, within one optimizer step's window).
inline int owner_of_micro_batch(int64_t index, int world_size) {
  return static_cast<int>(index % static_cast<int64_t>(world_size));
}

}  // namespace surogate::distributed
