// What the data-parallel rank engines of every backend share (rank_engine.h), written once: a
// rank's micro-batches of one step, kept from accumulate() until measure() (copied, micro_batch.h:
// the trainer reuses its buffers), then each run with the step observers of its place: the last
// one's backward reduces ZeRO-1's gradient buckets (gradient_buckets.h), every one's ZeRO-2/3's
// (sharded_gradients.h) and runs ZeRO-3's gathers.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "runtime/step_observer.h"
#include "train/device/micro_batch.h"
#include "train/device/parallel/rank_engine.h"

namespace surogate::train {

class ReplicaRankEngine : public RankEngine {
public:
  // `source`: the trainer's plan (its inputs' ids); `plan`: the one the rank runs. Both must outlive this.
  ReplicaRankEngine(const compiler::ExecutionPlan& source, const compiler::ExecutionPlan& plan)
      : source_(source), plan_(plan) {}

  void take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) override {
    pending_.push_back(copy_micro_batch(source_, plan_, inputs, sequence, sequence_ranks));
  }

  // The trainer plan's tensors matched by name in the plan the rank runs (ZeRO-3's is a copy).
  void keep_outputs(std::span<const graph::TensorId> tensors) override {
    kept_ids_.clear();
    for (graph::TensorId tensor : tensors) kept_ids_.push_back(plan_.tensor(source_.graph.tensor(tensor).name));
  }
  std::vector<KeptOutputs> take_outputs() override { return std::exchange(kept_, {}); }

  runtime::StepObserverList first_batches, last_batch;  // what each micro-batch's execute calls

protected:
  // keep_outputs()'s tensors in the rank's plan, and the outputs kept since take_outputs().
  std::span<const graph::TensorId> kept_ids() const { return kept_ids_; }
  std::vector<KeptOutputs> kept_;

  // `run(batch, last)` for each kept micro-batch in order, with `backend`'s step observer set for
  // it; then none is kept.
  template <typename Backend, typename Run>
  void run_batches(Backend& backend, Run run) {
    SUROGATE_CHECK(!pending_.empty(), "every rank trains gradient_accumulation_steps micro-batches a step");
    for (size_t index = 0; index < pending_.size(); ++index) {
      const bool last = index + 1 == pending_.size();
      runtime::StepObserverList& observers = last ? last_batch : first_batches;
      backend.set_step_observer(observers.empty() ? nullptr : &observers);
      run(pending_[index], last);
    }
    backend.set_step_observer(nullptr);
    pending_.clear();
  }

private:
  const compiler::ExecutionPlan& source_;
  const compiler::ExecutionPlan& plan_;
  std::vector<MicroBatch> pending_;
  std::vector<graph::TensorId> kept_ids_;
};

}  // namespace surogate::train
