// The data-parallel replica strategy of the parallel device (parallel_device.cpp), written once for
// every backend: a ReplicaRankEngine is one rank's part of the step when each rank runs the whole
// model (data and sequence parallelism, docs/architecture.md), driving the rank of a backend
// (rank_backend.h: CpuRank, CudaRank) and its plans' ReplicaRunner (cpu_rank_plans.h,
// cuda_rank_plans.h) over the world's communicator:
//   run_micro_batches(): the rank's micro-batches, kept from take() (copied, micro_batch.h: the
//     trainer reuses its buffers), each run with the step observers of its place: the last one's
//     backward reduce-scatters ZeRO-1's gradient buckets (gradient_buckets.h), every one's ZeRO-2/3's
//     (sharded_gradients.h) and runs ZeRO-3's gathers.
//   measure(): the rank's losses and the squares of its shard's summed gradients (every level
//     reduce-scatters: a rank receives the world's sums of the tensors it steps alone).
//   step_shard() / publish_shard(): each rank clips and steps its shard; ZeRO-1/2 then give every
//     rank every shard's weights (shard_publish.h: the backend's flat buffer all-gathered — fp32,
//     or a GPU's bf16 weights, whose other units' fp32 masters gather_stale_masters() brings up to
//     date before a download — or, where it has none, its bucket staging). ZeRO-1 publishes in the
//     gradient buckets, which a GPU runs on its side stream: the next step's first micro-batch
//     waits for each bucket before the step that first reads its weights (the backend's
//     publish_waits()), and everything else that reads the weights settles the publish first.
//   finish_update(): the FP8 copies of trained weights rewritten, the gradients zeroed, and
//     fp8_hybrid's scaling state max-reduced over the world and rolled, so every rank quantizes as
//     one rank running the whole window would (quant/fp8_scaling.h).
// Every communicator's collectives come in this one order on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "distributed/communicator.h"
#include "distributed/shard_placement.h"
#include "runtime/step_observer.h"
#include "train/device/fp8_state.h"
#include "train/device/gradient_buckets.h"
#include "train/device/micro_batch.h"
#include "train/device/parallel/rank_backend.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/shard_publish.h"

namespace surogate::train {

// What every replica engine of a backend's ranks reads (written before the engines run).
struct ReplicaShared {
  const compiler::ExecutionPlan* plan = nullptr;       // the trainer's (its inputs' ids)
  const compiler::ExecutionPlan* rank_plan = nullptr;  // what the ranks run (ZeRO-3: weights in gather buffers)
  std::vector<size_t> shard_sizes;  // the all-gather's pieces (elements of the flat buffer), one per rank
  size_t units = 0;                 // the trainable units
  std::span<const GradientBucket> publish_buckets;  // ZeRO-1: the publish's buckets (empty: one exchange)
  std::optional<Fp8State> fp8;      // fp8_hybrid's scaling state, in each rank's plan
};

class ReplicaRankEngine final : public RankEngine {
public:
  // `shared` must outlive the engine.
  explicit ReplicaRankEngine(const ReplicaShared& shared) : shared_(shared) {}

  void take(std::span<const runtime::InputBinding> inputs, int sequence, int sequence_ranks) override;
  void run_micro_batches() override;
  RankMeasure measure() override;
  bool has_router_aux_loss() const override { return runner->has_router_aux_loss(); }
  void set_grad_norm(double norm) override { rank->set_grad_norm(norm); }
  void step_shard(const OptimizerStep& step) override {
    rank->step(step);
    rank->end_step_phase("optimizer (clip and step the shard)");
  }
  void publish_shard() override;
  // Before a download: the world's fp32 masters where the publish left other ranks' behind
  // (RankBackend::take_stale_masters). Collective.
  void gather_stale_masters();
  // Before the host reads or writes the rank's weights (an evaluation, an upload): the publish
  // finished.
  void settle_publish() { rank->settle_publish(); }
  void finish_update(const OptimizerStep& step) override;
  void calibrate_fp8_scaling() override;
  void drop_fp8_amaxes() override {
    if (shared_.fp8) runner->drop_fp8_amaxes(*shared_.fp8);
  }
  void zero_gradients() override { rank->zero_gradients(); }
  std::vector<StateTensor> optimizer_state() override { return rank->optimizer_state(); }
  size_t gradient_accumulator_bytes() const override { return rank->gradient_accumulator_bytes(); }
  // The trainer plan's tensors matched by name in the plan the rank runs (ZeRO-3's is a copy).
  void keep_outputs(std::span<const graph::TensorId> tensors) override;
  std::vector<KeptOutputs> take_outputs() override { return runner->take_outputs(); }

  distributed::Shard shard;  // of the trainable units
  std::unique_ptr<ReplicaRunner> runner;
  std::unique_ptr<RankBackend> rank;  // released before the runner, whose plan its pieces read
  std::unique_ptr<distributed::Communicator> world;  // on the rank's device (a GPU: its stream)
  runtime::StepObserverList first_batches, last_batch;  // what each micro-batch's execute calls

private:
  // fp8_hybrid: the world's recorded amaxes max-reduced and rolled into the slot of `step`.
  void roll_fp8(int64_t step, float headroom);

  const ReplicaShared& shared_;
  std::vector<MicroBatch> pending_;
};

}  // namespace surogate::train
