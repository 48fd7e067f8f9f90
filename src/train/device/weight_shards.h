// ZeRO-3 (shard_weights): which weights the ranks of a data-parallel world shard, and which rank
// keeps each one between uses — decided once here for the devices (parallel/data_parallel_ranks.cpp,
// parallel/cpu_rank_host.cpp, parallel/cuda_rank_host.cpp) and for the memory estimate (memory_budget.h).
//
// Sharded: every weight the trainer loads — the trainable ones and the frozen base of LoRA,
// which is most of a LoRA run's memory. Not here: what a device writes itself (the quantized
// pieces of a QLoRA or fp8_hybrid base, the FP8 copies of trained weights, the FP8 scaling
// state). The quantized base has a schedule of its own, gathered as bytes
// (quantized_base_shards.h: shared out, whole with persistent_quants, or in a host image with
// offload_quants); the rest stays whole on every rank.
//
// Owners: a trainable weight is kept by the rank whose optimizer shard holds it (so the rank that
// steps it keeps it, and nothing moves after the step); the frozen weights are placed over the
// ranks by the same placement function (distributed::place_shards), in plan order, on their own.
#pragma once

#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "compiler/weight_gathering.h"
#include "distributed/shard_placement.h"

namespace surogate::train {

// The parameters of `plan` a ZeRO-3 world shards, in plan order.
std::vector<graph::TensorId> shardable_weights(const compiler::ExecutionPlan& plan);

// Every shardable weight with the rank that keeps it. `trainable`: the trainable weights in the
// device's order, `trainable_shards`: the optimizer's placement over them (one per rank).
std::vector<compiler::ShardedWeight> weight_owners(const compiler::ExecutionPlan& plan,
                                                   std::span<const graph::TensorId> trainable,
                                                   std::span<const distributed::Shard> trainable_shards, int world_size);

// The gather schedule of a ZeRO-3 world over `plan` (weight_owners, then
// compiler::schedule_weight_gathering).
compiler::WeightGathering zero3_gathering(const compiler::ExecutionPlan& plan, std::span<const graph::TensorId> trainable,
                                          std::span<const distributed::Shard> trainable_shards, int world_size);

// The gather schedule of an evaluator under ZeRO-3 (a forward plan on one GPU): every shardable
// weight gathered layer by layer from one source (the host copies), as a world of one.
compiler::WeightGathering evaluation_gathering(const compiler::ExecutionPlan& plan);

}  // namespace surogate::train
