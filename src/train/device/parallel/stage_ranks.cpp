// The pipeline stage strategy, written once for every backend; see stage_ranks.h.
#include "train/device/parallel/stage_ranks.h"

#include "core/error.h"

namespace surogate::train {

StageRankEngine::StageRankEngine(const distributed::ParallelLayout& layout, int local)
    : place(layout.place(layout.first_rank + local)), group_index(stage_group_index(layout, place)), layout_(layout) {}

void StageRankEngine::place_shard(std::span<const size_t> owned_sizes) {
  const std::vector<distributed::Shard> shards = distributed::place_shards(owned_sizes, layout_.gradient_group_size());
  shard = shards[static_cast<size_t>(group_index)];
  shard_sizes_ = distributed::shard_sizes(shards);
  units_ = owned_sizes.size();
}

void StageRankEngine::take(std::span<const runtime::InputBinding> inputs, int sequence_index, int sequence_ranks) {
  pending_.push_back(runner->take(inputs, sequence_index, sequence_ranks));
}

// The schedule, then (on the rank's device, in this order) the tied gradients summed into the
// first stage's, the group's sums of the owned ones (reduce-scattered: the rank's shard), and their
// squares.
void StageRankEngine::run_micro_batches() {
  SUROGATE_CHECK(!pending_.empty(), "every stage trains gradient_accumulation_steps micro-batches a step");
  runner->run(pending_, *world, [&](int other) { return layout_.rank_at({other, place.replica, place.sequence}); });
  const DType dtype = rank->gradient_dtype();
  sum_tied_gradients(*tied_pair, rank->tied_gradients(), dtype);
  sum_stage_gradients(*group, rank->flat_gradients(), shard_sizes_, dtype);
  rank->count_squares(shard.first_unit, shard.end_unit);
}

// The micro-batches are kept until the rank's device finished with them (a GPU reads their inputs
// asynchronously).
RankMeasure StageRankEngine::measure() {
  const double squares = rank->squares(*world);
  const double loss = runner->loss();
  pending_.clear();
  return {loss, squares, 0.0};
}

// ZeRO-1: the stepped shards to every rank of the group, then the tied weights from the first
// stage to the last.
void StageRankEngine::publish_shard() {
  const PublishedWeights flat = rank->published_weights();
  train::publish_shard(*group, flat.data, shard_sizes_, flat.dtype, shard, units_, rank->shard_copies());
  share_tied_weights(*tied_pair, rank->tied_weights(), DType::F32);
  runner->refresh_weights();
}

}  // namespace surogate::train
