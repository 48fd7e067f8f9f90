// The parallel layout of a training run, described once: how many ranks train together, how they
// divide the work, where this process's ranks sit among them, and how their state is sharded.
//
// Three ways of dividing, which multiply: world_size = data × sequence × pipeline.
//   - data (the replicas): each replica trains its own micro-batches; their gradients are summed.
//   - sequence (sequence_parallel_size): the ranks of a sequence group share every micro-batch of
//     their replica, each holding 1/N of its tokens; attention exchanges heads for tokens between
//     them (distributed/sequence_parallel_graph.h), everything else is per token.
//   - pipeline (pipeline_parallel_size): the decoder's layers are split into stages, one stage per
//     rank; micro-batches flow through the stages (distributed/pipeline_schedule.h).
// Rank r sits at (stage, replica, sequence index) with the sequence index varying fastest, then the
// replica, then the stage: r = (stage · data + replica) · sequence + sequence index. So a sequence
// group, whose all-to-all moves the most bytes, is consecutive ranks (the GPUs of one machine, and
// one process when a process drives several ranks), and the stages, which exchange only the
// activations at their boundaries, are the outermost split (across machines when needed).
// The ranks that hold the same parameters — one stage's data × sequence ranks, the gradient group —
// sum their gradients, and ZeRO shards over them: ZeRO-1 (each rank keeps the optimizer state of
// its shard only) or ZeRO-2 (`shard_gradients`: the gradients are reduce-scattered, each rank
// keeping the summed gradients of its shard only) or ZeRO-3 (`shard_weights`: each rank also keeps
// only its shard of the weights, gathered layer by layer for the steps that read them; data
// parallelism only: not with sequence or pipeline parallelism in this version).
//
// Ranks and processes: a run is one process or a world of processes (process_world.h), and each
// process drives the same number of rank threads — `gpus` of them (`distributed.gpus_per_node`
// when set, with `distributed.num_nodes` > 1, where each process is one node). Process p holds the
// global ranks [p·L, (p + 1)·L). On GPUs its first rank uses CUDA device 0 when the launcher made
// exactly its L GPUs visible (srun --gpus-per-task, Ray), else device LOCAL_RANK·L (torchrun).
//
// Data: one optimizer step reads the global window of gradient_accumulation_steps × data
// micro-batches from the one deterministic loader order; micro-batch i of the window belongs to
// replica i mod data (owner_of_micro_batch). So N replicas see exactly the micro-batches one rank
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

// A rank's coordinates in the layout.
struct RankPlace {
  int stage = 0;     // pipeline stage
  int replica = 0;   // data-parallel replica
  int sequence = 0;  // index in its sequence group (which 1/N of the tokens it holds)
};

struct ParallelLayout {
  int world_size = 1;        // every rank of every process: data × sequence × pipeline
  int data_size = 1;         // replicas (data parallelism)
  int sequence_size = 1;     // ranks sharing each micro-batch's tokens (sequence_parallel_size)
  int pipeline_size = 1;     // stages (pipeline_parallel_size)
  int local_ranks = 1;       // the ranks this process drives (one thread each)
  int first_rank = 0;        // the global rank of this process's first rank
  int first_device = 0;      // GPUs: the CUDA device of this process's first rank
  int processes = 1;
  int zero_level = 1;            // 1: optimizer state sharded; 2: and gradients; 3: and weights
  bool shard_gradients = false;  // zero_level >= 2, shard_gradients or shard_weights: every micro-batch reduce-scattered into sharded accumulators
  bool shard_weights = false;    // zero_level 3 or shard_weights: weights sharded, gathered per layer
  bool several_ranks() const { return world_size > 1; }
  bool spans_processes() const { return processes > 1; }
  bool holds_rank(int rank) const { return rank >= first_rank && rank < first_rank + local_ranks; }
  // The ranks that hold one stage's parameters and sum their gradients (ZeRO shards over them).
  int gradient_group_size() const { return data_size * sequence_size; }
  RankPlace place(int rank) const {
    return {rank / gradient_group_size(), (rank / sequence_size) % data_size, rank % sequence_size};
  }
  int rank_at(const RankPlace& place) const {
    return (place.stage * data_size + place.replica) * sequence_size + place.sequence;
  }
  // "2 data-parallel ranks, ZeRO-1 (optimizer state sharded)"; "4 ranks (2 data-parallel × 2
  // sequence-parallel), ZeRO-1 (...)"; with "(2 processes × 1 rank)" when spread.
  std::string describe() const;
};

// The layout of a run on CPU ranks: `gpus: N` (N > 1) asks for N rank threads per process; 0 and 1
// mean one (no GPU is visible, so "every visible GPU" is none and each process trains one CPU rank).
// Both layouts split the world by sequence_parallel_size and pipeline_parallel_size: a world that
// is no multiple of their product is a UserError naming them and `gpus`.
ParallelLayout cpu_parallel_layout(const Config& config, const ProcessPlacement& placement = {});
// The layout of a run on GPUs: `gpus: N` asks for N GPUs per process, `gpus: 0` for every visible
// one (shared out among the LOCAL_WORLD_SIZE processes of a machine). The caller
// (train/device/backend_selection.cpp) has checked that `gpus` GPUs are visible; a process whose
// GPUs (from LOCAL_RANK) are not all visible is a UserError naming LOCAL_RANK.
ParallelLayout gpu_parallel_layout(const Config& config, int visible_gpus, const ProcessPlacement& placement = {});

// With distributed.num_nodes > 1 each process is one node: a UserError naming the option unless
// the launcher started exactly num_nodes processes (a lone process means it was not launched).
void check_nodes_match_processes(const DistributedConfig& nodes, const ConfigSources& sources,
                                 const ProcessPlacement& placement);

// Which replica trains micro-batch `index` (0-based, within one optimizer step's window); with
// neither sequence nor pipeline parallelism the replica is the rank.
inline int owner_of_micro_batch(int64_t index, int replicas) {
  return static_cast<int>(index % static_cast<int64_t>(replicas));
}

}  // namespace surogate::distributed
