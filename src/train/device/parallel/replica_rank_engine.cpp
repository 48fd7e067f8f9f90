// The data-parallel replica strategy, written once for every backend; see replica_rank_engine.h.
#include "train/device/parallel/replica_rank_engine.h"

#include "core/error.h"
#include "quant/fp8_scaling.h"

namespace surogate::train {

void ReplicaRankEngine::take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) {
  pending_.push_back(copy_micro_batch(*shared_.plan, *shared_.rank_plan, inputs, sequence, sequence_ranks));
}

void ReplicaRankEngine::keep_outputs(std::span<const graph::TensorId> tensors) {
  std::vector<graph::TensorId> ids;
  for (graph::TensorId tensor : tensors) ids.push_back(shared_.rank_plan->tensor(shared_.plan->graph.tensor(tensor).name));
  runner->keep_outputs(ids);
}

// Each kept micro-batch in order with the step observers of its place; then none is kept.
void ReplicaRankEngine::run_micro_batches() {
  SUROGATE_CHECK(!pending_.empty(), "every rank trains gradient_accumulation_steps micro-batches a step");
  rank->begin_step_phases();
  // The first micro-batch after a publish still in flight waits for its buckets as it reads them.
  runtime::StepObserverList after_publish;
  if (runtime::StepObserver* waits = rank->publish_waits()) after_publish.add(waits);
  for (size_t index = 0; index < pending_.size(); ++index) {
    const bool last = index + 1 == pending_.size();
    runtime::StepObserverList& observers = last ? last_batch : first_batches;
    if (index == 0 && !after_publish.empty()) {
      after_publish.add(&observers);
      runner->set_step_observer(&after_publish);
    } else {
      runner->set_step_observer(observers.empty() ? nullptr : &observers);
    }
    runner->run(pending_[index], last);
  }
  runner->set_step_observer(nullptr);
  pending_.clear();
  rank->end_step_phase("micro-batches (the reduction overlapping their backward)");
  rank->finish_reduction();
  rank->end_step_phase("gradient reduction left after the backward");
}

// Every rank holds the world's sums of its shard's gradients alone (the reduction is a
// reduce-scatter at every ZeRO level): it counts and reports their squares, whose sum over the
// world is the norm every rank clips by.
RankMeasure ReplicaRankEngine::measure() {
  rank->count_squares(shard.first_unit, shard.end_unit);
  rank->end_step_phase("gradient norm");
  const double squares = rank->squares(*world);
  RankMeasure measured = runner->losses();
  measured.squares = squares;
  return measured;
}

// ZeRO-1: through the flat buffer in the gradient buckets; ZeRO-2: in one exchange, or through the
// backend's bucket staging where it has no flat buffer.
void ReplicaRankEngine::publish_shard() {
  if (const PublishedWeights flat = rank->published_weights(); flat.data == nullptr) {
    rank->publish_in_buckets();
  } else if (shared_.publish_buckets.empty()) {
    train::publish_shard(*world, flat.data, shared_.shard_sizes, flat.dtype, shard, shared_.units,
                         rank->shard_copies());
  } else {
    distributed::Communicator* group = rank->publish_group();
    rank->begin_publish();
    train::publish_shard_in_buckets(group != nullptr ? *group : *world, flat.data, shared_.publish_buckets,
                                    flat.dtype, shard, rank->shard_copies(),
                                    [this](size_t bucket) { rank->bucket_published(bucket); });
  }
  rank->end_step_phase("weight exchange (publish)");
}

void ReplicaRankEngine::gather_stale_masters() {
  rank->settle_publish();
  if (void* masters = rank->take_stale_masters()) world->all_gather(masters, shared_.shard_sizes, DType::F32);
}

void ReplicaRankEngine::finish_update(const OptimizerStep& step) {
  // fp8_hybrid: the FP8 copies read every weight, so they wait for the whole publish.
  if (shared_.fp8) rank->settle_publish();
  runner->refresh_fp8_weight_copies();
  rank->zero_gradients();
  roll_fp8(step.step, 1.0f);
  rank->end_step_phase("FP8 copies, zeroing, amax exchange");
}

void ReplicaRankEngine::calibrate_fp8_scaling() {
  if (shared_.fp8) roll_fp8(shared_.fp8->shape.history - 1, quant::kFp8CalibrationHeadroom);
}

void ReplicaRankEngine::roll_fp8(int64_t step, float headroom) {
  if (const std::optional<Fp8State>& fp8 = shared_.fp8) {
    world->all_reduce_amax(runner->fp8_state(*fp8), static_cast<size_t>(fp8->shape.floats()));
    runner->roll_fp8_history(*fp8, step, headroom);
  }
}

}  // namespace surogate::train
