// The data-parallel replica strategy, written once for every backend; see replica_rank_engine.h.
#include "train/device/parallel/replica_rank_engine.h"

#include "core/error.h"

namespace surogate::train {

void ReplicaRankEngine::take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) {
  pending_.push_back(copy_micro_batch(*shared_.plan, *shared_.rank_plan, inputs, sequence, sequence_ranks));
}

void ReplicaRankEngine::keep_outputs(std::span<const graph::TensorId> tensors) {
  std::vector<graph::TensorId> ids;
  for (graph::TensorId tensor : tensors) ids.push_back(shared_.rank_plan->tensor(shared_.plan->graph.tensor(tensor).name));
  backend->keep_outputs(ids);
}

// Each kept micro-batch in order with the step observers of its place; then none is kept.
void ReplicaRankEngine::run_micro_batches() {
  SUROGATE_CHECK(!pending_.empty(), "every rank trains gradient_accumulation_steps micro-batches a step");
  for (size_t index = 0; index < pending_.size(); ++index) {
    const bool last = index + 1 == pending_.size();
    runtime::StepObserverList& observers = last ? last_batch : first_batches;
    backend->set_step_observer(observers.empty() ? nullptr : &observers);
    backend->run(pending_[index], last);
  }
  backend->set_step_observer(nullptr);
  pending_.clear();
  backend->finish_batches();
}

// ZeRO-2/3: the rank holds (and reports) its shard's sums; ZeRO-1: every rank holds the same
// summed gradients, the world's first rank counts and reports them (a GPU counts them too: it clips
// by its own count).
RankMeasure ReplicaRankEngine::measure() {
  if (shared_.shard_gradients) {
    backend->count_squares(shard.first_unit, shard.end_unit);
  } else if (counts_replicated_ || backend->clips_by_own_squares()) {
    backend->count_squares(0, shared_.units);
  }
  RankMeasure measured = backend->measure(*world);
  if (!shared_.shard_gradients && !counts_replicated_) measured.squares = 0.0;
  return measured;
}

// ZeRO-1/2: through the flat buffer, or the backend's bucket staging where it has none.
void ReplicaRankEngine::publish_shard() {
  if (void* flat = backend->flat_weights()) {
    train::publish_shard(*world, flat, shared_.shard_sizes, DType::F32, shard, shared_.units, backend->shard_copies());
  } else {
    backend->publish_in_buckets();
  }
}

void ReplicaRankEngine::finish_update(const OptimizerStep& step) {
  backend->refresh_fp8_weight_copies();
  backend->zero_gradients();
  if (const std::optional<Fp8State>& fp8 = shared_.fp8) {
    world->all_reduce_amax(backend->fp8_state(*fp8), static_cast<size_t>(fp8->shape.floats()));
    backend->roll_fp8_history(*fp8, step.step);
  }
}

}  // namespace surogate::train
