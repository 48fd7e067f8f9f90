// The communicators of a pipeline rank beside the world that carries the stages' transfers, and
// the gradient and weight exchanges over them, written once for the CPU and the CUDA pipeline
// ranks (the stage strategy, parallel/stage_ranks.cpp, calls them; each backend's ranks connect
// the groups):
//   - the stage's gradient group: every rank of one stage (its data × sequence ranks), which sums
//     the gradients of the tensors the stage steps, and whose ranks each step a shard of them
//     (ZeRO-1/2 over the group; the weights come back through publish_shard, shard_publish.h);
//   - the tied pair: when the first and the last stage read one parameter (tied embeddings), the
//     first stage of a replica and sequence index and its last stage. The first stage owns and
//     steps the tied tensors: the last stage's gradient of each is added to the first's before the
//     group sums them, and the last stage takes the updated weights back after the step.
#pragma once

#include <cstddef>
#include <span>

#include "core/dtype.h"
#include "distributed/communicator.h"
#include "distributed/parallel_layout.h"
#include "distributed/gloo_communicator.h"  // RankGroup

namespace surogate::train {

// The rank's index in its stage's gradient group: replica · sequence ranks + sequence index.
int stage_group_index(const distributed::ParallelLayout& layout, const distributed::RankPlace& place);
// The groups to connect, for world rank `rank`: its stage's gradient group, and its tied pair (a
// group of its own when nothing is `tied` or the rank is on neither end of the pipeline).
distributed::RankGroup stage_gradient_group(const distributed::ParallelLayout& layout, int rank);
distributed::RankGroup tied_pair_group(const distributed::ParallelLayout& layout, int rank, bool tied);

// Elements of a buffer in a collective's dtype.
struct CollectiveRegion {
  void* data = nullptr;
  size_t count = 0;
};

// After the schedule, in this order: each tied tensor's gradient summed over the pair, then the
// stage's owned gradients (`owned`, the group's flat buffer) summed over the group, reduce-scattered
// into each rank's piece (`pieces`: the ranks' shards, which each steps alone; the other pieces are
// left undefined). Nothing for a group of one.
void sum_tied_gradients(distributed::Communicator& pair, std::span<const CollectiveRegion> tied, DType dtype);
void sum_stage_gradients(distributed::Communicator& group, CollectiveRegion owned, std::span<const size_t> pieces,
                         DType dtype);
// After the step: the first stage's tied weights to the last stage.
void share_tied_weights(distributed::Communicator& pair, std::span<const CollectiveRegion> tied, DType dtype);

}  // namespace surogate::train
